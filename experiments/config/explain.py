"""`python -m experiments.config explain KEY`: what a key of an experiment file does, read from the models.

The descriptions, bounds and defaults live on the pydantic fields (`Field(description=...)`), so the answer is
never out of date with what the file accepts. A `training.*` key may belong to several algorithms and an
`environment.env_config.*` key to several env families, with different defaults: every owner is named, and each
default where they differ. A section lists its keys; an unknown key is an InputError with the closest known one.
"""
from __future__ import annotations

import difflib
import json
import re
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args, get_origin

import annotated_types as at
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python

from envs.errors import InputError
from experiments.config import catalog
from experiments.config.experiment import ExperimentConfig

EVERY_EXPERIMENT = "every experiment"
# The keys whose model depends on the file (the algorithm, the env family), and where their models come from.
DISPATCHED = (catalog.TRAINING, catalog.ENV_CONFIG, catalog.EVALUATION_ENV_CONFIG)


@dataclass(frozen=True)
class Scope:
    """A model that holds the keys under `prefix` for the experiments of `owners` (empty: every experiment)."""

    model: type[BaseModel]
    prefix: str
    owners: tuple[str, ...] = ()
    kind: str = ""  # what the owners are: "algorithm" or "env family"


@dataclass(frozen=True)
class Match:
    """A key found in one scope: the field, or the section (a model) it opens."""

    scope: Scope
    info: FieldInfo | None
    section: type[BaseModel] | None


def scopes() -> list[Scope]:
    """Where keys live: the experiment's own sections, each algorithm's training model and each env family's
    env_config model (under environment.env_config and evaluation.env_config)."""
    found = [Scope(catalog.FileKeys, ""), Scope(ExperimentConfig, "")]
    for model, names in catalog.owners_of(catalog.training_models()).items():
        found.append(Scope(model, f"{catalog.TRAINING}.", tuple(names), "algorithm"))
    for model, env_ids in catalog.owners_of(catalog.env_config_models()).items():
        for prefix in (catalog.ENV_CONFIG, catalog.EVALUATION_ENV_CONFIG):
            found.append(Scope(model, f"{prefix}.", tuple(env_ids), "env family"))
    return found


def _find(scope: Scope, key: str) -> Match | None:
    """The field or section at `key` in `scope`, or None."""
    if not key.startswith(scope.prefix):
        return None
    if not scope.prefix and any(key.startswith(f"{dispatched}.") for dispatched in DISPATCHED):
        return None  # the experiment's own model does not hold the algorithm's or the family's keys
    model: type[BaseModel] | None = scope.model
    info: FieldInfo | None = None
    for part in key[len(scope.prefix):].split("."):
        if model is None or part not in model.model_fields:
            return None
        info = model.model_fields[part]
        model = catalog.section_model(info)
    return Match(scope, info, model)


def known_keys() -> list[str]:
    """Every dotted key an experiment file can hold, each once."""
    keys: dict[str, None] = {}
    for scope in scopes():
        for ref in catalog.walk(scope.model, scope.prefix):
            if scope.prefix or not any(ref.key.startswith(f"{dispatched}.") for dispatched in DISPATCHED):
                keys[ref.key] = None
    return list(keys)


def unknown_key(key: str) -> InputError:
    """The refusal of a key no model holds, with the closest known key (by the whole key, else by its last part)."""
    known = known_keys()
    close = difflib.get_close_matches(key, known, n=1)
    if not close:
        last = {k.rsplit(".", 1)[-1]: k for k in reversed(known)}
        close = [last[name] for name in difflib.get_close_matches(key.rsplit(".", 1)[-1], list(last), n=1)]
    if close:
        return InputError(f"unknown key {key!r}: did you mean {close[0]!r}? (python -m experiments.config explain "
                          "SECTION lists a section's keys)")
    return InputError(f"unknown key {key!r}: did you mean a key of one of the sections that python -m "
                      "experiments.config explain lists?")


def explain(key: str = "") -> str:
    """What `key` does (a dotted key of an experiment file; empty: the file's sections), as printable text."""
    key = key.strip().strip(".")
    if not key:
        title = "experiment file\n  Its sections and keys (explain SECTION lists a section's keys)."
        return _section_text(title, [Match(scope, None, scope.model) for scope in scopes() if not scope.prefix])
    matches = [match for scope in scopes() if (match := _find(scope, key)) is not None]
    if not matches:
        raise unknown_key(key)
    if key in DISPATCHED:  # the section's keys are those of every algorithm's (every family's) model
        owned = [Match(scope, None, scope.model) for scope in scopes() if scope.prefix == f"{key}."]
        return _section_text(_field_text(key, matches), owned)
    sections = [match for match in matches if match.section is not None]
    if sections:
        return _section_text(_field_text(key, matches), sections)
    return _field_text(key, matches)


def _field_text(key: str, matches: list[Match]) -> str:
    """The field's description, type, bounds and default per group of owners that agree on them."""
    groups: dict[tuple[str, str, str], list[Match]] = {}
    for match in matches:
        info = match.info or FieldInfo()
        ident = ((info.description or "").strip(), type_text(info.annotation), bounds_text(info))
        groups.setdefault(ident, []).append(match)
    everyone = [owner for match in matches for owner in match.scope.owners]
    lines = [key if not everyone else f"{key}  ({_owners_text(matches[0].scope.kind, everyone)})"]
    for (description, type_name, bounds), group in groups.items():
        owners = [owner for match in group for owner in (match.scope.owners or (EVERY_EXPERIMENT,))]
        kind = group[0].scope.kind
        lines.append(f"  {description}")
        lines.append(f"  type:     {type_name}")
        in_type = any(sign in type_name for sign in ("<", ">", "at least", "at most"))  # e.g. list[int (>= 1)]
        lines.append(f"  bounds:   {bounds or ('those in its type' if in_type else 'none')}")
        lines.append(f"  default:  {_defaults_text(group)}")
        lines.append(f"  owner:    {_owners_text(kind, owners)}")
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def _owners_text(kind: str, owners: list[str]) -> str:
    """`algorithms dqn, sac`, `env family trading/Spot-v0`, or every experiment (a key of the experiment's own)."""
    if not kind:
        return EVERY_EXPERIMENT
    plural = {"algorithm": "algorithms", "env family": "env families"}.get(kind, f"{kind}s")
    return f"{plural if len(owners) > 1 else kind} {', '.join(owners)}"


def _defaults_text(group: list[Match]) -> str:
    """One default, or each owner's where they differ: "3 (dqn), 1 (sac)"."""
    by_value: dict[str, list[str]] = {}
    for match in group:
        value = default_text(match.info) if match.info is not None else ""
        by_value.setdefault(value, []).extend(match.scope.owners)
    if len(by_value) == 1:
        return next(iter(by_value))
    return ", ".join(f"{value} ({', '.join(owners)})" for value, owners in by_value.items())


def _section_text(title: str, sections: list[Match]) -> str:
    """`title` (the section's own text) and the section's keys, one line each; a key only some owners have names
    them."""
    everyone = [owner for match in sections for owner in match.scope.owners]
    rows: dict[str, tuple[list[str], set[str]]] = {}
    for match in sections:
        model = match.section or match.scope.model
        for name, info in model.model_fields.items():
            shown = f"{name} (section)" if catalog.section_model(info) else name
            texts, owners = rows.setdefault(shown, ([], set()))
            texts.append(first_sentence(info.description or ""))
            owners.update(match.scope.owners)
    width = max((len(name) for name in rows), default=0)
    lines = [title, "  keys:"]
    for name, (texts, owners) in rows.items():
        only = "" if owners == set(everyone) else f" [{', '.join(o for o in everyone if o in owners)}]"
        differs = " (*)" if len(set(texts)) > 1 else ""
        lines.append(f"    {name.ljust(width)}  {texts[0]}{differs}{only}")
    if any(len(set(texts)) > 1 for texts, _ in rows.values()):
        lines.append("  (*) described differently per owner: explain the key for each one's text")
    return "\n".join(lines)


def first_sentence(text: str) -> str:
    """The first sentence of a description (its one-line form); "e.g." and "i.e." do not end one."""
    return re.split(r"(?<!e\.g\.)(?<!i\.e\.)(?<=[.!?])\s+(?=[A-Z])", text.strip(), maxsplit=1)[0]


def type_text(annotation: Any) -> str:
    """A field's type as a user reads it: `int | null`, `"fast" | "rllib"`, `list[int (>= 1)]`, `section`."""
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is type(None):
        return "null"
    if annotation is Any:
        return "any"
    if origin is Annotated:
        bounds = bounds_text(args[1:])
        return f"{type_text(args[0])} ({bounds})" if bounds else type_text(args[0])
    if origin is Literal:
        return " | ".join(json.dumps(arg) for arg in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_text(arg) for arg in args)
    if origin in (list, tuple, dict, set):
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return f"list[{type_text(args[0])}]"
        if origin is tuple:  # a fixed-length list: its items in order
            return f"[{', '.join(type_text(arg) for arg in args)}]"
        return f"{origin.__name__}[{', '.join(type_text(arg) for arg in args)}]"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    return getattr(annotation, "__name__", str(annotation))


_BOUNDS = ((at.Ge, "ge", ">="), (at.Gt, "gt", ">"), (at.Le, "le", "<="), (at.Lt, "lt", "<"))


def bounds_text(source: FieldInfo | tuple[Any, ...]) -> str:
    """The bounds in a field's (or an Annotated type's) metadata: `>= 0, < 1`, `at least 1 item`."""
    metadata = list(source.metadata if isinstance(source, FieldInfo) else source)
    parts = []
    for item in metadata:
        if isinstance(item, FieldInfo):
            parts.append(bounds_text(item))
        for kind, attr, sign in _BOUNDS:
            if isinstance(item, kind):
                parts.append(f"{sign} {getattr(item, attr)}")
        if isinstance(item, at.MinLen):
            parts.append(f"at least {item.min_length} item{'s' if item.min_length != 1 else ''}")
        if isinstance(item, at.MaxLen):
            parts.append(f"at most {item.max_length} items")
    return ", ".join(part for part in parts if part)


def default_text(info: FieldInfo) -> str:
    """A field's default as YAML-like JSON (`null`, `true`, `[128, 128]`), or why it has none."""
    if info.is_required():
        return "none: required once the file and its extends: chain are merged"
    value = info.get_default(call_default_factory=True, validated_data={})
    if isinstance(value, BaseModel):
        return "each key's own (below)"
    return json.dumps(to_jsonable_python(value))
