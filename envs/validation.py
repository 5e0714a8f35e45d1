"""One way to validate what a user wrote, and one style of error for it.

Experiment files (`experiments.config.experiment`), algorithm sections (`algos/`) and every env family's
env_config are pydantic models derived from `StrictModel` (unknown keys are errors, numbers written
as text such as `1e-4` become numbers). A `ValidationError` becomes an `InputError` through
`describe_validation_error`: one line naming the file and the dotted key, with a "did you
mean" from `did_you_mean` wherever a name was mistyped. Everything else that refuses a name (an env
id, an algorithm, a result key) calls `did_you_mean` too, so all such messages read alike.
"""
from __future__ import annotations

import difflib
from typing import Any, Iterable

from pydantic import BaseModel, ConfigDict, ValidationError

from envs.errors import InputError


class StrictModel(BaseModel):
    """A section of user input: unknown keys are errors; values are coerced where that is safe."""

    model_config = ConfigDict(extra="forbid")


def closest(given: str, known: Iterable[str]) -> str | None:
    """The known name closest to `given`, or None when none is close."""
    close = difflib.get_close_matches(str(given), [str(k) for k in known], n=1)
    return close[0] if close else None


def did_you_mean(given: str, known: Iterable[str], prefix: str = "") -> str:
    """": did you mean 'x'?" for the closest known name (`prefix` + name), or "" when none is close."""
    match = closest(given, known)
    return f": did you mean {prefix + match!r}?" if match else ""


def unknown_name(what: str, given: str, known: Iterable[str], where: str = "") -> InputError:
    """The one message for a name that is not among `known`: what, the name, the closest known one and the list."""
    known = sorted(str(k) for k in known)
    return InputError(f"{where}{what} {given!r} is unknown{did_you_mean(given, known)} (known: {', '.join(known)})")


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Field names of the model found by walking `loc` (for "did you mean" hints)."""
    current: Any = model
    for part in loc:
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            break
        annotation = fields[part].annotation
        current = next((a for a in getattr(annotation, "__args__", (annotation,)) if hasattr(a, "model_fields")),
                       annotation)
    return list(getattr(current, "model_fields", {}))


def describe_validation_error(error: ValidationError, source: str, model: type[BaseModel],
                              prefix: str = "") -> str:
    """One readable line: where (`source`), the dotted key (after `prefix`), what is wrong and the fix, for the
    first problem, and how many more there are. Unknown keys come first: a misspelt key also shows up as a
    missing one, and the spelling is the fix."""
    errors = sorted(error.errors(), key=lambda e: e["type"] != "extra_forbidden")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return _describe(errors[0], source, model, prefix) + more


def _describe(item: Any, source: str, model: type[BaseModel], prefix: str) -> str:
    loc = tuple(item["loc"])
    key = prefix + ".".join(str(p) for p in loc)
    if not loc:  # a check across keys (a model validator): its message names the keys
        return f"{source}: {item['msg'].removeprefix('Value error, ')}"
    if item["type"] == "extra_forbidden":
        known = _fields_at(model, loc[:-1])
        parent = prefix + "".join(f"{p}." for p in loc[:-1])
        return (f"{source}: unknown key {key!r}{did_you_mean(str(loc[-1]), known, parent)} "
                f"(known here: {', '.join(known)})")
    if item["type"] == "missing":
        return f"{source}: missing key {key!r}: add it"
    given = item.get("input")
    shown = "" if isinstance(given, dict) or len(repr(given)) >= 80 else f" (got {given!r})"
    return f"{source}: {key}: {item['msg'].removeprefix('Value error, ')}{shown}"


def validate(model: type[BaseModel], values: dict[str, Any], source: str, prefix: str = "") -> Any:
    """`model(**values)`, or an InputError in the one style."""
    try:
        return model.model_validate(values)
    except ValidationError as error:
        raise InputError(describe_validation_error(error, source, model, prefix)) from None
