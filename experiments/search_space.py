"""YAML search spaces -> Ray Tune domains.

`{loguniform: [1e-4, 1e-3]}`, `{choice: [0.95, 0.99]}`, `{grid: [...]}`, `{uniform: [a, b]}`,
`{randint: [lo, hi]}` and the quantized forms `{quniform|qloguniform|qrandint: [lo, hi, q]}`,
keyed by the dotted path of the setting they replace (e.g. `training.lr`).
"""
from __future__ import annotations

from typing import Any

from envs.errors import InputError

_ARITY = {"uniform": 2, "loguniform": 2, "randint": 2, "quniform": 3, "qloguniform": 3, "qrandint": 3}


def to_domain(key: str, spec: dict[str, list[Any]]) -> Any:
    """One Tune domain (or grid) for one YAML search entry."""
    from ray import tune

    (form, args), = spec.items()
    if form in ("choice", "grid"):
        if not isinstance(args, list) or not args:
            raise InputError(f"tune.search_space.{key}: {form} needs a non-empty list of values")
        return tune.choice(args) if form == "choice" else tune.grid_search(args)
    if not isinstance(args, list) or len(args) != _ARITY[form]:
        shape = "[low, high]" if _ARITY[form] == 2 else "[low, high, q]"
        raise InputError(f"tune.search_space.{key}: {form} takes {shape}, got {args!r}")
    low, high = args[0], args[1]
    if not low < high:
        raise InputError(f"tune.search_space.{key}: {form} needs low < high, got {args!r}")
    if form in ("loguniform", "qloguniform") and low <= 0:
        raise InputError(f"tune.search_space.{key}: {form} needs a positive low bound")
    return getattr(tune, form)(*args)


def to_domains(space: dict[str, dict[str, list[Any]]]) -> dict[str, Any]:
    return {key: to_domain(key, spec) for key, spec in space.items()}


def describe(space: dict[str, dict[str, list[Any]]]) -> dict[str, str]:
    """Human-readable forms for the dry-run printout."""
    return {key: f"{form}{args}" for key, spec in space.items() for form, args in spec.items()}
