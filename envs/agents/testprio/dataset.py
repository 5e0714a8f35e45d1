"""From an env_config to ready-to-serve arrays: load, slice, split by time, featurize.

RLlib builds many environment copies per process and the evaluator builds the same data
again, so the prepared data is cached per process, keyed by the file's identity
(path, size, modification time) and the settings that shape it; its arrays are read-only.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from envs.agents.testprio.config import PrioritizationConfig
from envs.agents.testprio.data import CIHistory, load_history, pooled_history
from envs.agents.testprio.features import FeatureSet, build_features, build_portable
from envs.agents.testprio.synthetic import generate_history
from envs.errors import InputError


@dataclass(frozen=True)
class PreparedData:
    """A history, its features and its time split into training, validation and test cycles."""

    history: CIHistory
    features: FeatureSet
    window: int
    train_cycles: np.ndarray  # cycle positions, in time order
    test_cycles: np.ndarray
    # Between train and test (empty unless env_config.validation_fraction > 0).
    validation_cycles: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def cycles(self, split: str) -> np.ndarray:
        return {"train": self.train_cycles, "validation": self.validation_cycles}.get(split, self.test_cycles)


def prepare(config: PrioritizationConfig) -> PreparedData:
    """The prepared data for a validated config (cached per process)."""
    if config.data_paths is not None:
        identities = tuple(file_identity(path, f"env_config.data_paths[{k}]")
                           for k, path in enumerate(config.data_paths))
        return _prepare_pooled(identities, config.history_window, config.train_fraction, config.max_cycles,
                               config.validation_fraction, config.synthetic_histories)
    identity = None if config.data_path is None else file_identity(config.data_path, "env_config.data_path")
    return _prepare(identity, config.history_window, config.train_fraction, config.max_cycles,
                    config.validation_fraction, config.features)


def file_identity(data_path: str, key: str) -> tuple[str, int, int]:
    """A file's identity for the cache: its resolved path, size and modification time."""
    path = Path(data_path).expanduser().resolve()
    if not path.is_file():
        raise InputError(f"{key}: {data_path} does not exist; point it at a RETECS or enriched CSV, or leave "
                         f"data_path null for synthetic data")
    stat = path.stat()
    return str(path), stat.st_size, stat.st_mtime_ns


def time_split(n_cycles: int, train_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """Earliest cycles for training, the rest for testing; both must be non-empty."""
    n_train = int(n_cycles * train_fraction)
    if n_train < 1 or n_train >= n_cycles:
        raise InputError(
            f"env_config.train_fraction: {train_fraction} of {n_cycles} cycles leaves an empty training or "
            f"test split; use more cycles (max_cycles) or a fraction between {1 / n_cycles:.3f} and "
            f"{(n_cycles - 1) / n_cycles:.3f}"
        )
    return np.arange(n_train), np.arange(n_train, n_cycles)


def validation_split(
    pre_test: np.ndarray, n_cycles: int, validation_fraction: float
) -> tuple[np.ndarray, np.ndarray]:
    """The last `validation_fraction` × n_cycles of the pre-test cycles become the validation split."""
    n_validation = int(round(n_cycles * validation_fraction))
    if validation_fraction > 0 and (n_validation < 1 or n_validation >= pre_test.size):
        raise InputError(
            f"env_config.validation_fraction: {validation_fraction} of {n_cycles} cycles leaves an empty "
            f"training or validation split; use more cycles or a fraction that keeps both non-empty"
        )
    cut = pre_test.size - n_validation
    return pre_test[:cut], pre_test[cut:]


@functools.lru_cache(maxsize=8)
def _prepare(
    identity: tuple[str, int, int] | None,
    history_window: int | None,
    train_fraction: float,
    max_cycles: int | None,
    validation_fraction: float = 0.0,
    feature_set: str = "basic",
) -> PreparedData:
    history = generate_history() if identity is None else load_history(identity[0])
    if max_cycles is not None:
        history = history.head(max_cycles)
    pre_test, test = time_split(history.n_cycles, train_fraction)
    train, validation = validation_split(pre_test, history.n_cycles, validation_fraction)
    window = history_window or history.default_history_window
    if feature_set == "portable":
        features = build_portable(history, window)
    else:  # scale statistics come from the training cycles only (not validation, not test)
        features = build_features(history, window, len(train), extended=feature_set == "extended")
    return _frozen(PreparedData(history=history, features=features, window=window, train_cycles=train,
                                test_cycles=test, validation_cycles=validation))


@functools.lru_cache(maxsize=4)
def _prepare_pooled(
    identities: tuple[tuple[str, int, int], ...],
    history_window: int | None,
    train_fraction: float,
    max_cycles: int | None,
    validation_fraction: float,
    synthetic_histories: int = 0,
) -> PreparedData:
    """Several histories as one (portable features): each is split in time on its own, and the parts pooled."""
    histories = [load_history(identity[0]) for identity in identities]
    histories += [generate_history(seed=SYNTHETIC_SEED + k) for k in range(synthetic_histories)]
    if max_cycles is not None:
        histories = [history.head(max_cycles) for history in histories]
    splits: dict[str, list[np.ndarray]] = {"train": [], "validation": [], "test": []}
    first_cycle = 0
    for history in histories:
        pre_test, test = time_split(history.n_cycles, train_fraction)
        train, validation = validation_split(pre_test, history.n_cycles, validation_fraction)
        for name, cycles in (("train", train), ("validation", validation), ("test", test)):
            splits[name].append(cycles + first_cycle)
        first_cycle += history.n_cycles
    pooled = pooled_history(histories)
    window = history_window or pooled.default_history_window
    return _frozen(PreparedData(history=pooled, features=build_portable(pooled, window), window=window,
                                train_cycles=np.concatenate(splits["train"]),
                                test_cycles=np.concatenate(splits["test"]),
                                validation_cycles=np.concatenate(splits["validation"])))


# The first seed of the synthetic histories a pool adds (env_config.synthetic_histories); not the default history's.
SYNTHETIC_SEED = 1000


def _frozen(data: PreparedData) -> PreparedData:
    """The cached data, made read-only: every env copy and the evaluator share these arrays."""
    for array in [*vars(data.history).values(), data.features.duration_estimates]:
        if isinstance(array, np.ndarray):
            array.setflags(write=False)
    return data

