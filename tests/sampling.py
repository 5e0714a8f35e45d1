"""The sweep a file asks Tune for, drawn without running it: `experiments.sweep.tuner`'s search space and searcher,
asked for trials as Tune's loop asks them (tests/unit/test_search_sampling.py; tests/integration/test_selection.py
runs one through Tune itself and gets the same)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import REPO

SEARCHED = ["tune.num_samples=2", "tune.seeds=[0, 1]", "tune.search_space={training.lr: {loguniform: [0.0001, 0.001]}}"]


def sweep_of(overrides: list[str]) -> tuple[Any, Any]:
    """(the experiment, its ParamSpace) of conf/dqn_btc.yaml with `overrides`, on the holdout split."""
    from experiments.config.load import load_experiment
    from experiments.hardware import resolve_plan, select_preset
    from experiments.sweep.tuner import build_param_space

    exp = load_experiment(REPO / "conf/dqn_btc.yaml", [*overrides, "evaluation.protocol=holdout"])
    preset, _ = select_preset("cpu", {}, None)
    return exp, build_param_space(exp, resolve_plan(preset, exp.timeframe, exp.num_trials()))


def sampled(overrides: list[str], storage: Path) -> list[tuple[float, int]]:
    """(lr, seed) of every trial the file's searcher hands Tune, sorted; no Ray is started."""
    from ray.tune.experiment import Experiment

    from experiments.sweep.tuner import search_algorithm

    exp, params = sweep_of(overrides)
    searcher = search_algorithm(exp)
    searcher.add_configurations([Experiment("sampled", lambda config: None, config=params.space,
                                            num_samples=exp.tune.num_samples, storage_path=str(storage))])
    trials = iter(searcher.next_trial, None)
    return sorted((trial.config["lr"], trial.config["seed"]) for trial in trials)
