"""What the readers of a served model's raw inputs share (envs.trading.bar_reader, envs.portfolio.universe_reader):
the window of features they compute, and how they are stored beside the model (their settings as JSON and their
normalization arrays in one .npz read without pickle, tagged with the reader's format so that another reader's file
is refused)."""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import numpy as np

from envs.errors import InputError
from envs.trading.features.spec import parse_features_json


class FeatureWindowReader:
    """For a dataclass with `features` (a feature list), `feature_bars` (their look-back) and `window`."""

    features: list[Any]
    feature_bars: int
    window: int

    @functools.cached_property
    def _items(self) -> tuple:
        """The feature list as objects, parsed once per reader (not per decision)."""
        return parse_features_json(json.dumps(self.features, sort_keys=True, default=str))

    @property
    def bars_needed(self) -> int:
        """The last bars a read needs: every feature's look-back behind each row of the window."""
        return self.feature_bars + self.window - 1


def save_reader(path: str | Path, config: dict[str, Any], fmt: str, mean: np.ndarray, std: np.ndarray) -> None:
    with open(path, "wb") as handle:
        np.savez(handle, config=np.array(json.dumps({**config, "format": fmt})), mean=mean, std=std)


def load_reader(path: str | Path, fmt: str, what: str) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    """The settings (without the format tag) and the mean and std arrays; InputError when `path` holds another
    format."""
    with np.load(path, allow_pickle=False) as stored:
        config = json.loads(str(stored["config"]))
        mean, std = stored["mean"], stored["std"]
    if config.pop("format", None) != fmt:
        raise InputError(f"{path}: not a {what} of this platform ({fmt})")
    return config, mean, std
