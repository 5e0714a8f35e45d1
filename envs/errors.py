"""The two exception types a command ends with: bad user input (files, keys, values) and faults outside it.

Everything the user can fix by editing a file or a flag raises `InputError` with a
message that names the file or key and says how to fix it. The CLI prints the message
on one line and exits with code 2; no traceback is shown for these. `RunFault` is the same for what the
user did not cause, with exit code 4.
"""
from __future__ import annotations

from pathlib import Path


class InputError(ValueError):
    """Bad user input: the message alone must tell the user what to change."""


class RunFault(Exception):
    """A fault outside the user's input ended a command (a server gone, a disk full, a store that lost a file the
    run wrote). The message is the one line the user sees; CLIs exit 4 (docs/faults.md)."""


def read_user_text(path: Path, what: str, fix: str, encoding: str = "utf-8") -> str:
    """The text of a file the user named, or an InputError saying which file, what was wrong with it and
    `fix` (missing, a folder, not text, unreadable): every CLI reads its input files through this."""
    try:
        return path.read_text(encoding=encoding)
    except FileNotFoundError:
        raise InputError(f"{path}: {what} not found: {fix}") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, not a {what}: {fix}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a UTF-8 text file, so not a {what}: {fix}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read the {what} ({exc.strerror}): {fix}") from None
