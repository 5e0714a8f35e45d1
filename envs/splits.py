"""Evaluation protocols: how one time axis is cut into (train, validation, test) folds.

A fold is three half-open row ranges of the data's time axis (bars, CI cycles, ...), in time order,
with `embargo` rows dropped between train and validation and between validation and test. Each fold
fits everything (feature normalization, weights) on its train rows, selects the model on its
validation rows and is scored once on its test rows.

- `holdout`: one fold from `fractions` (default 70/15/15): today's single split.
- `walk_forward`: `folds` test windows of `test_size` rows tile the end of the axis, oldest first, so
  their out-of-sample returns join into one series; each fold validates on the `validation_size`
  rows before its test window and trains on everything before that (`expanding`) or on the last
  `train_size` rows (`rolling`).
- `refit`: one fold that holds nothing out, for a configuration already chosen and tested on another protocol's
  folds (`experiments.retrain --refit`): it trains on every row (`expanding`) or on the last `train_size` rows
  (`rolling`). Its validation part is empty, and so is its test part unless `test_size` rows at the end are kept
  out of training: the bars that arrived after a refit, to backtest it on.

A protocol is data, not a code path: an env resolves `(protocol, fold index)` against its own axis
length with `Protocol.fold(n, index)`, so the holdout default and every walk-forward fold go through
the same function. Folds are counted from the end of the axis, so one protocol fits series of
different lengths (20 coins with different histories).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from envs.errors import InputError

PROTOCOLS = ("holdout", "walk_forward", "refit")
TRAIN_WINDOWS = ("expanding", "rolling")
PARTS = ("train", "validation", "test")


def _key(source: str, name: str) -> str:
    return f"{source}.{name}" if source else name


@dataclass(frozen=True)
class Fold:
    """Row ranges [start, end) of one fold; `index` counts from the oldest test window."""

    index: int
    train: tuple[int, int]
    validation: tuple[int, int]
    test: tuple[int, int]

    def part(self, name: str) -> tuple[int, int]:
        return getattr(self, name)


@dataclass(frozen=True)
class Protocol:
    type: str = "holdout"
    fractions: tuple[float, float, float] = (0.7, 0.15, 0.15)  # holdout only
    folds: int = 1
    train: str = "expanding"
    train_size: int | None = None       # rolling only: rows per train window
    validation_size: int | None = None  # walk_forward: rows per validation window
    test_size: int | None = None        # walk_forward: rows per test window
    embargo: int = 0                    # rows dropped between train | validation | test

    @classmethod
    def from_dict(cls, config: dict[str, Any] | str | None, source: str = "evaluation.protocol") -> "Protocol":
        """Validated protocol; `"holdout"` is short for `{type: holdout}`."""
        if config is None:
            return cls()
        if isinstance(config, str):
            config = {"type": config}
        if not isinstance(config, dict):
            raise InputError(f"{source or 'protocol'}: write holdout, or a mapping such as "
                             "{type: walk_forward, folds: 4, validation_size: 1500, test_size: 1500}")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(config) - known)
        if unknown:
            raise InputError(f"{source or 'protocol'}: unknown key(s) {', '.join(unknown)}: "
                             f"known keys are {', '.join(sorted(known))}")
        values = dict(config)
        if "fractions" in values:
            values["fractions"] = tuple(values["fractions"])
        protocol = cls(**values)
        protocol._check(source)
        return protocol

    def _check(self, source: str) -> None:
        if self.type not in PROTOCOLS:
            raise InputError(f"{_key(source, 'type')} {self.type!r}: use one of {', '.join(PROTOCOLS)}")
        if self.train not in TRAIN_WINDOWS:
            raise InputError(f"{_key(source, 'train')} {self.train!r}: use one of {', '.join(TRAIN_WINDOWS)}")
        for name in ("folds", "train_size", "validation_size", "test_size", "embargo"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise InputError(f"{_key(source, name)}: a whole number of rows >= 0 is needed, got {value!r}")
        if self.type == "holdout":
            if len(self.fractions) != 3 or min(self.fractions) <= 0 or abs(sum(self.fractions) - 1) > 1e-6:
                raise InputError(f"{_key(source, 'fractions')}: three positive numbers summing to 1, "
                                 "e.g. [0.7, 0.15, 0.15]")
            if self.folds != 1:
                raise InputError(f"{_key(source, 'folds')}: holdout has one fold: "
                                 f"use type: walk_forward for folds: {self.folds}")
            return
        if self.type == "refit":
            self._check_refit(source)
            return
        if self.folds < 1:
            raise InputError(f"{_key(source, 'folds')}: at least 1")
        for name in ("validation_size", "test_size"):
            if not getattr(self, name):
                raise InputError(f"{_key(source, name)}: walk_forward needs it (rows per window, e.g. 1500)")
        if self.train == "rolling" and not self.train_size:
            raise InputError(f"{_key(source, 'train_size')}: a rolling train window needs its length in rows")
        if self.train == "expanding" and self.train_size is not None:
            raise InputError(f"{_key(source, 'train_size')}: only for train: rolling (expanding uses all earlier rows)")

    def _check_refit(self, source: str) -> None:
        for name, value in (("folds", self.folds != 1), ("validation_size", self.validation_size),
                            ("embargo", self.embargo)):
            if value:
                raise InputError(f"{_key(source, name)}: a refit is one fold with no validation part and no "
                                 f"embargo: remove {name}")
        if self.train == "rolling" and not self.train_size:
            raise InputError(f"{_key(source, 'train_size')}: a rolling train window needs its length in rows")
        if self.train == "expanding" and self.train_size is not None:
            raise InputError(f"{_key(source, 'train_size')}: only for train: rolling (expanding uses all earlier rows)")

    def required_parts(self) -> tuple[str, ...]:
        """The parts every fold must fill: all three, except that a refit has no validation part, and a test part
        only when `test_size` keeps one."""
        if self.type != "refit":
            return PARTS
        return ("train", "test") if self.test_size else ("train",)

    @property
    def num_folds(self) -> int:
        return 1 if self.type == "holdout" else self.folds

    def as_dict(self) -> dict[str, Any]:
        """The protocol as env_config data (JSON/YAML friendly)."""
        values = asdict(self)
        values["fractions"] = list(self.fractions)
        return values

    def fold(self, n: int, index: int, min_rows: int = 1, source: str = "evaluation.protocol") -> Fold:
        """Fold `index` on an axis of `n` rows; an InputError if it does not fit."""
        if not 0 <= index < self.num_folds:
            raise InputError(f"{source}: fold {index} does not exist: this protocol has {self.num_folds} fold(s)")
        cut = {"holdout": self._holdout, "refit": self._refit}.get(self.type)
        fold = cut(n) if cut else self._walk_forward(n, index)
        for name in self.required_parts():
            start, end = fold.part(name)
            if end - start < min_rows:
                raise InputError(f"{source}: fold {index}'s {name} part has {max(end - start, 0)} rows of the "
                                 f"{n} available, fewer than the {min_rows} needed: use a longer history, fewer "
                                 "folds or shorter windows")
        return fold

    def folds_for(self, n: int, min_rows: int = 1) -> list[Fold]:
        return [self.fold(n, index, min_rows) for index in range(self.num_folds)]

    def _holdout(self, n: int) -> Fold:
        train_end = int(n * self.fractions[0])
        validation_end = int(n * (self.fractions[0] + self.fractions[1]))
        e = self.embargo
        return Fold(0, (0, train_end), (train_end + e, validation_end), (validation_end + e, n))

    def _refit(self, n: int) -> Fold:
        train_end = n - int(self.test_size or 0)
        train_start = 0 if self.train == "expanding" else train_end - int(self.train_size or 0)
        if train_start < 0:
            raise InputError(f"protocol refit: its rolling train window needs {-train_start} rows more history than "
                             f"the {n} available: use a longer history or a shorter train_size")
        return Fold(0, (train_start, max(train_end, 0)), (train_end, train_end), (train_end, n))

    def _walk_forward(self, n: int, index: int) -> Fold:
        test_size, validation_size = int(self.test_size or 0), int(self.validation_size or 0)
        test_end = n - (self.folds - 1 - index) * test_size
        test_start = test_end - test_size
        validation_end = test_start - self.embargo
        validation_start = validation_end - validation_size
        train_end = validation_start - self.embargo
        train_start = 0 if self.train == "expanding" else train_end - int(self.train_size or 0)
        if train_start < 0:
            raise InputError(f"evaluation.protocol: fold {index} needs {-train_start} rows more history than the "
                             f"{n} available for its rolling train window: use a longer history, fewer folds or "
                             "a shorter train_size")
        return Fold(index, (train_start, max(train_end, 0)), (validation_start, validation_end), (test_start, test_end))


def episode_bounds(lo: int, hi: int, episode_length: int | None, random_start: bool,
                   rng: np.random.Generator) -> tuple[int, int]:
    """An episode's first decision row and last row reached in a part [lo, hi): the whole part (validation, test,
    or episode_length None), else `episode_length` rows from a uniformly drawn start (training); the last fill, at
    row hi - 1, stays inside the part."""
    last_row = hi - 1
    if episode_length is None or not random_start or last_row - lo <= episode_length:
        return lo, last_row
    start = int(rng.integers(lo, last_row - episode_length + 1))
    return start, start + episode_length
