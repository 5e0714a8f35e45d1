"""The CI histories a test-prioritization env_config reads, cut into its train, validation and test cycles
(envs.datasets): one set of parts per history, pooled ones included, each history split in time on its own."""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

from envs.agents.testprio.config import parse_config
from envs.agents.testprio.data import CIHistory, load_history
from envs.agents.testprio.dataset import SYNTHETIC_SEED, file_identity, time_split, validation_split
from envs.agents.testprio.synthetic import DEFAULT_SEED, generate_history
from envs.datasets import DataPart, file_digest, part_digest


def data_parts(env_config: dict[str, Any]) -> list[DataPart]:
    """Each history's non-empty parts, in the order the env pools them."""
    config = parse_config(env_config)
    if config.data_paths is not None:
        sources = [*config.data_paths, *(f"synthetic:{SYNTHETIC_SEED + k}" for k in range(config.synthetic_histories))]
    else:
        sources = [config.data_path or f"synthetic:{DEFAULT_SEED}"]
    parts: list[DataPart] = []
    for k, source in enumerate(sources):
        synthetic = source.startswith("synthetic:")
        key = f"env_config.data_paths[{k}]" if config.data_paths is not None else "env_config.data_path"
        label, digest, history = _history(source if synthetic else file_identity(source, key))
        if config.max_cycles is not None:
            history = history.head(config.max_cycles)
        pre_test, test = time_split(history.n_cycles, config.train_fraction)
        train, validation = validation_split(pre_test, history.n_cycles, config.validation_fraction)
        for name, cycles in (("train", train), ("validation", validation), ("test", test)):
            if cycles.size:
                start, end = int(cycles[0]), int(cycles[-1]) + 1
                parts.append(DataPart(label, name, part_digest(digest, start, end), source, end - start,
                                      f"cycle {history.cycle_ids[start]}", f"cycle {history.cycle_ids[end - 1]}"))
    return parts


@functools.lru_cache(maxsize=16)
def _history(source: str | tuple[str, int, int]) -> tuple[str, str, CIHistory]:
    """(label, content digest, history) of `synthetic:<seed>` or of a CSV's identity (path, size, modification time,
    as dataset.py's cache keys it: a history rewritten since is read again)."""
    if isinstance(source, str):
        seed = int(source.removeprefix("synthetic:"))
        return f"synthetic-ci-{seed}", hashlib.sha256(source.encode()).hexdigest(), generate_history(seed=seed)
    path = Path(source[0])
    return path.stem, file_digest(path), load_history(path)
