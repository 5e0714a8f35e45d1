"""The one way to address a value in nested dicts by a path: "training.lr" in an experiment's sections,
"evaluation/env_runners/episode_return_mean" in an RLlib result, or a tuple of keys in a Tune param space.

Experiment files, --set overrides, search spaces and tune.metric all name settings by path; keeping one reader
and one writer means they agree on what a path means.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

_MISSING = object()


def _parts(path: str | Sequence[str], sep: str) -> list[str]:
    return path.split(sep) if isinstance(path, str) else list(path)


def value_at(tree: Any, path: str | Sequence[str], sep: str = ".", default: Any = _MISSING) -> Any:
    """The value at `path`; `default` when a key on the way is missing (KeyError without a default)."""
    node = tree
    for part in _parts(path, sep):
        if not isinstance(node, Mapping) or part not in node:
            if default is _MISSING:
                raise KeyError(path)
            return default
        node = node[part]
    return node


def set_value(tree: dict[str, Any], path: str | Sequence[str], value: Any, sep: str = ".",
              create: bool = False) -> None:
    """Put `value` at `path` in place; with `create`, missing parents become empty dicts (else KeyError)."""
    *parents, leaf = _parts(path, sep)
    node = tree
    for part in parents:
        node = node.setdefault(part, {}) if create else node[part]
    node[leaf] = value


def with_value(tree: dict[str, Any], path: str | Sequence[str], value: Any, sep: str = ".") -> dict[str, Any]:
    """A deep copy of `tree` with `value` at `path` (the original is left as it was)."""
    changed = copy.deepcopy(tree)
    set_value(changed, path, value, sep)
    return changed
