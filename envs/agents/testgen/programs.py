"""The programs under test: real parsers that web tests feed, called through their public API only.

Each entry is the few lines a fuzz harness needs: how one input (bytes) reaches the parser, which
modules' source files count for coverage, which exceptions the parser documents for bad input (a
rejected input, not a finding), and 2-4 small valid examples from its documentation to start from.
We write no parser code: coverage, rejections and crashes are those of the library as shipped.

`json` is left out on purpose: its scanner is the C extension `_json`, so a Python tracer sees
almost none of the code that parses, and coverage-guided search would be blind there.
"""
from __future__ import annotations

import email
import email.errors
import email.policy
import http.cookies
import importlib
import tomllib
import urllib.parse
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Callable

import markdown_it

from envs.validation import unknown_name


@dataclass(frozen=True)
class Program:
    """One program under test: `run` feeds it one input and returns nothing (or raises)."""

    run: Callable[[bytes], None]
    modules: tuple[str, ...]  # modules whose source files are traced (a package: every module under it)
    documented_errors: tuple[type[BaseException], ...]  # the input was refused as documented: not a finding
    seeds: tuple[bytes, ...]  # small valid inputs from the docs: the starting corpus


def _text(data: bytes) -> str:
    """Bytes -> str for str APIs; invalid UTF-8 becomes U+FFFD rather than an error of our own."""
    return data.decode("utf-8", "replace")


def _html(data: bytes) -> None:
    parser = HTMLParser()
    parser.feed(_text(data))
    parser.close()


def _url(data: bytes) -> None:
    # urlsplit is lazy: the port and hostname are parsed (and validated) when read.
    parts = urllib.parse.urlsplit(_text(data))
    _ = parts.port, parts.hostname
    urllib.parse.parse_qsl(parts.query)


def _email(data: bytes) -> None:
    # Header values are parsed lazily, when read: read every one, in every part.
    message = email.message_from_bytes(data, policy=email.policy.default)
    for part in message.walk():
        for value in part.values():
            str(value)


def _toml(data: bytes) -> None:
    tomllib.loads(_text(data))


def _cookies(data: bytes) -> None:
    http.cookies.SimpleCookie().load(_text(data))


# One parser for all inputs: render() keeps no state between calls, and building a MarkdownIt costs 3x a
# short render, all of it in traced code that every execution would repeat.
_MARKDOWN = markdown_it.MarkdownIt()


def _markdown(data: bytes) -> None:
    _MARKDOWN.render(_text(data))


PROGRAMS: dict[str, Program] = {
    # Not the `html` package: its entities table would flood the auto-dictionary with 2,000 entity names.
    "html.parser": Program(
        _html, ("html.parser", "_markupbase"), (),
        (b"<!DOCTYPE html><html><head><title>Test</title></head><body><h1>Parse me!</h1></body></html>",
         b'<img src="python-logo.png" alt="The Python logo">',
         b"<!-- a comment --><style type=\"text/css\">#python { color: green }</style>")),
    "urllib.parse": Program(
        _url, ("urllib.parse", "ipaddress"), (ValueError,),
        (b"http://www.cwi.nl:80/%7Eguido/Python.html",
         b"scheme://netloc/path;parameters?query=argument&key=value#fragment",
         b"http://[::1]:8080/a?b=c&d=e",
         b"//www.cwi.nl:80/%7Eguido/Python.html")),
    "email": Program(
        _email, ("email",), (email.errors.MessageError,),
        (b"From: Foo Bar <user@example.com>\r\nTo: a@example.com, b@example.org\r\nSubject: Hello\r\n\r\n"
         b"Body\r\n",
         b"Subject: =?utf-8?q?caf=C3=A9?=\nDate: Fri, 09 Nov 2001 01:08:47 -0000\nContent-Type: text/plain; "
         b"charset=\"utf-8\"\n\nhi\n",
         b"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"XX\"\n\n"
         b"--XX\nContent-Type: text/plain\n\none\n--XX--\n")),
    "tomllib": Program(
        _toml, ("tomllib",), (tomllib.TOMLDecodeError,),
        (b'title = "TOML Example"\n[owner]\nname = "Tom"\ndob = 1979-05-27T07:32:00-08:00\n',
         b"[database]\nports = [ 8000, 8001, 8002 ]\ndata = [ [\"delta\", \"phi\"], [3.14] ]\n"
         b"enabled = true\n",
         b"[[products]]\nname = 'Hammer'\nsku = 738594937\npoint = { x = 1, y = 2 }\n")),
    "http.cookies": Program(
        _cookies, ("http.cookies",), (http.cookies.CookieError,),
        (b"chips=ahoy; vienna=finger",
         b'keebler="E=everybody; L=\\"Loves\\"; fudge=\\012;";',
         b"fig=newton; Path=/; Max-Age=3600; Secure; HttpOnly")),
    "markdown-it": Program(
        _markdown, ("markdown_it", "mdurl"), (),
        (b"# markdown-it rulezz!\n\n*emphasis* and `code`\n",
         b"- item\n- [link](http://example.com \"title\")\n\n> quote\n",
         b"| a | b |\n|---|---|\n| 1 | 2 |\n\n```python\nprint(1)\n```\n")),
}


def program(name: str) -> Program:
    """The table entry of `name`, or an InputError naming the closest known program."""
    if name not in PROGRAMS:
        raise unknown_name("program", name, PROGRAMS)
    return PROGRAMS[name]


def source_files(modules: tuple[str, ...]) -> tuple[str, ...]:
    """The .py files of `modules` as their code objects name them (a package: every file under it), sorted."""
    files: set[str] = set()
    for name in modules:
        module = importlib.import_module(name)
        path = Path(module.__file__ or "")
        if hasattr(module, "__path__"):
            files.update(str(p) for root in module.__path__ for p in Path(root).rglob("*.py"))
        elif path.suffix == ".py":
            files.add(str(path))
    return tuple(sorted(files))
