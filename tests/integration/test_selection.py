"""Model selection keeps and scores the best checkpoint, Tune runs the trials the file's searcher draws (that the
same file draws the same sweep is tests/unit/test_search_sampling.py's), and the same seed trains the same model.

The first three run real Ray Tune with tiny trainables, so they pin Tune's own behaviour under the run
config and searcher that `experiments.sweep.tuner` builds for every experiment; the last trains FastDQN.
"""
from __future__ import annotations

from pathlib import Path

from experiments.config.load import load_experiment
from tests.conftest import REPO
from tests.sampling import SEARCHED, sampled, sweep_of

METRIC = "evaluation/env_runners/episode_return_mean"
# A validation curve that peaks early (iteration 3), as a real sweep's best trial did at iteration 6 of 14.
CURVE = [1.0, 5.0, 14.15, 2.0, -1.57, 0.5]


def _curve_trainable(score_key: str | None):
    """A class trainable, like RLlib's Algorithm: reports CURVE as RLlib nests it and saves a checkpoint
    when Tune asks; `score_key`: also the flat copy that `algos.rllib.config.copy_selection_score` adds to every
    RLlib result. Defined in a function so Ray ships it by value to its workers."""
    from ray import tune

    from algos.rllib.config import copy_selection_score

    class Curve(tune.Trainable):
        def setup(self, config: dict) -> None:
            self.step_index = 0

        def step(self) -> dict:
            value = CURVE[self.step_index]
            self.step_index += 1
            result = {"evaluation": {"env_runners": {"episode_return_mean": value}},
                      "done": self.step_index == len(CURVE)}
            if score_key:
                copy_selection_score(METRIC, "max", result=result)
            return result

        def save_checkpoint(self, checkpoint_dir: str) -> None:
            Path(checkpoint_dir, "value.txt").write_text(str(CURVE[self.step_index - 1]))

        def load_checkpoint(self, checkpoint_dir: str) -> None:
            raise AssertionError("never restored")

    return Curve


def _kept_values(result) -> list[float]:
    """The values of the checkpoints still on disk after the sweep."""
    return sorted(float(Path(c.path, "value.txt").read_text()) for c, _ in result.best_checkpoints
                  if Path(c.path).exists())


def _fit(trainable, tmp_path: Path, score_attribute: str, tune_prunes: bool = False):
    """The sweep's run config (its pruning callback keeps tune.checkpoint.num_to_keep); with `tune_prunes`,
    Tune's own pruning instead, ranking by `score_attribute`."""
    from ray.tune import Tuner

    from experiments.storage.checkpoint_pruning import CheckpointPruner
    from experiments.storage.filesystem import resolve_storage
    from experiments.sweep.tuner import run_config

    exp = load_experiment(REPO / "conf/dqn_btc.yaml", ["tune.checkpoint={frequency: 1, num_to_keep: 2}"])
    storage = resolve_storage(None, None, tmp_path, "test", {})
    config = run_config(exp, storage, storage.path("tune", "curve"), [])
    config.stop = None
    config.checkpoint_config.checkpoint_score_attribute = score_attribute
    if tune_prunes:
        config.checkpoint_config.num_to_keep = 2
        config.callbacks = [c for c in config.callbacks if not isinstance(c, CheckpointPruner)]
    return Tuner(trainable, run_config=config).fit()[0]


def test_keep_k_keeps_the_best_and_the_best_is_scored(ray_session, tmp_path):
    from algos.rllib.config import SELECTION_SCORE
    from experiments.records.checkpoints import best_checkpoint

    result = _fit(_curve_trainable(SELECTION_SCORE), tmp_path, SELECTION_SCORE)
    assert _kept_values(result) == [5.0, 14.15]  # the two best by validation: iterations 3 and 2
    checkpoint = best_checkpoint(result, "max")
    assert checkpoint.score == 14.15 and checkpoint.iteration == 3
    assert Path(checkpoint.path, "value.txt").read_text() == "14.15"


def test_tune_cannot_rank_by_a_nested_key(ray_session, tmp_path):
    """Why SELECTION_SCORE exists: ranked by the nested name, Tune keeps the newest checkpoints. If this
    starts failing, Tune learned to rank nested keys and the flat copy can go."""
    result = _fit(_curve_trainable(None), tmp_path, METRIC, tune_prunes=True)
    assert _kept_values(result) == [-1.57, 0.5]


def test_tune_runs_the_trials_the_files_searcher_draws(ray_session, tmp_path):
    """The sampling itself is tests/unit/test_search_sampling.py's, drawn from the searcher without Ray; here Tune
    runs the sweep and its trials are those."""
    from ray.tune import RunConfig, TuneConfig, Tuner

    from experiments.sweep.tuner import search_algorithm

    exp, params = sweep_of(SEARCHED)

    def report(config: dict) -> dict:
        return {"lr": config["lr"], "seed": config["seed"]}

    grid = Tuner(report, param_space=params.space,
                 tune_config=TuneConfig(num_samples=exp.tune.num_samples, search_alg=search_algorithm(exp)),
                 run_config=RunConfig(name="sampled", storage_path=str(tmp_path / "tune"), verbose=0)).fit()
    ran = sorted((r.metrics["lr"], r.metrics["seed"]) for r in grid)
    assert len(ran) == 4 and ran == sampled(SEARCHED, tmp_path)


def test_same_seed_same_training(ray_session):
    """A trial is reproducible from the file: the same seed gives the same training and validation
    numbers (FastDQN, CPU, one torch thread; docs/verdicts.md gives the spread when they are not)."""
    from experiments.hardware import resolve_plan, select_preset
    from experiments.sweep.rllib_config import build_config

    exp = load_experiment(REPO / "conf/dqn_btc.yaml", ["training.implementation=fast",
                                                       "training.replay_buffer.type=uniform",
                                                       "reporting.min_sample_timesteps_per_iteration=1500"])
    preset, _ = select_preset("cpu", {}, None)
    plan = resolve_plan(preset, exp.timeframe, 1)

    def history(seed: int) -> list[tuple[float, float]]:
        algo = build_config(exp, plan, seed=seed).build_algo()
        try:
            results = [algo.train() for _ in range(2)]
        finally:
            algo.stop()
        return [(r["evaluation"]["env_runners"]["episode_return_mean"],
                 r["learners"]["default_policy"]["qf_loss"]) for r in results]

    first = history(0)
    assert first == history(0)
    assert first != history(1)
