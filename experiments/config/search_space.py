"""YAML search spaces: checked and normalized without Ray, turned into Ray Tune domains with it.

`{loguniform: [1e-4, 1e-3]}`, `{choice: [0.95, 0.99]}`, `{grid: [...]}`, `{uniform: [a, b]}`,
`{randint: [lo, hi]}` and the quantized forms `{quniform|qloguniform|qrandint: [lo, hi, q]}`,
keyed by the dotted path of the setting they replace (e.g. `training.lr`). Values of choice and grid
may be anything the setting takes, lists included (e.g. `training.epsilon` schedules).
"""
from __future__ import annotations

from typing import Any

SEARCH_FORMS = ("choice", "grid", "uniform", "quniform", "loguniform", "qloguniform", "randint", "qrandint")
_ARITY = {"uniform": 2, "loguniform": 2, "randint": 2, "quniform": 3, "qloguniform": 3, "qrandint": 3}
_INTEGER_FORMS = ("randint", "qrandint")


def _number(key: str, form: str, value: Any) -> float | int:
    """A bound as a number: YAML reads `1e-4` as text, so numeric text is converted; anything else refused."""
    if isinstance(value, bool):
        raise ValueError(f"{key}: {form} bounds are numbers, got {value!r}")
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ValueError(f"{key}: {form} bounds are numbers, got {value!r}") from None
    if not isinstance(value, (int, float)):
        raise ValueError(f"{key}: {form} bounds are numbers, got {value!r}")
    if form in _INTEGER_FORMS:
        if float(value) != int(value):
            raise ValueError(f"{key}: {form} bounds are whole numbers, got {value!r}")
        return int(value)
    return float(value)


def check_domain(key: str, spec: Any) -> dict[str, list[Any]]:
    """One search entry, normalized (numeric bounds as numbers); ValueError naming the key and the fix."""
    if not isinstance(spec, dict) or len(spec) != 1 or next(iter(spec)) not in SEARCH_FORMS:
        raise ValueError(f"{key}: write one of {', '.join(SEARCH_FORMS)}, e.g. {{loguniform: [1e-4, 1e-3]}}")
    (form, args), = spec.items()
    if form in ("choice", "grid"):
        if not isinstance(args, list) or not args:
            raise ValueError(f"{key}: {form} needs a non-empty list of values")
        return {form: args}
    shape = "[low, high]" if _ARITY[form] == 2 else "[low, high, q]"
    if not isinstance(args, list) or len(args) != _ARITY[form]:
        raise ValueError(f"{key}: {form} takes {shape}, got {args!r}")
    numbers = [_number(key, form, value) for value in args]
    low, high = numbers[0], numbers[1]
    if not low < high:
        raise ValueError(f"{key}: {form} needs low < high, got {args!r}")
    if form in ("loguniform", "qloguniform") and low <= 0:
        raise ValueError(f"{key}: {form} needs a positive low bound, got {args!r}")
    if len(numbers) == 3 and not numbers[2] > 0:
        raise ValueError(f"{key}: {form} needs a positive step q, got {args!r}")
    return {form: numbers}


def check_search_space(space: dict[str, Any]) -> dict[str, dict[str, list[Any]]]:
    return {str(key): check_domain(str(key), spec) for key, spec in space.items()}


def candidate_values(spec: dict[str, list[Any]]) -> list[Any]:
    """Values a search entry can take that a setting's validation should accept: every choice/grid value,
    or the bounds of a range."""
    (form, args), = spec.items()
    return list(args) if form in ("choice", "grid") else list(args[:2])


def to_domain(spec: dict[str, list[Any]]) -> Any:
    """One Tune domain (or grid) for one checked YAML search entry."""
    from ray import tune

    (form, args), = spec.items()
    if form in ("choice", "grid"):
        return tune.choice(args) if form == "choice" else tune.grid_search(args)
    return getattr(tune, form)(*args)


def to_domains(space: dict[str, dict[str, list[Any]]]) -> dict[str, Any]:
    return {key: to_domain(spec) for key, spec in space.items()}


def describe(space: dict[str, dict[str, list[Any]]]) -> dict[str, str]:
    """Human-readable forms for the dry-run printout."""
    return {key: f"{form}{args}" for key, spec in space.items() for form, args in spec.items()}
