"""update -> retrain (full, then incremental) -> forward test -> gate -> aliases, on real Ray, Tune and MLflow.

The loop of docs/operations.md on a smoke budget (tests/integration/conftest.py, `operations_loop`): the bundled
bars with their last two months held back make a first champion with a recorded --promote; a retrain before new
bars arrive is refused; the two months are appended with `experiments.data update`; an incremental retrain
warm-starts from the champion and is judged against it on the newest 720 bars.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tests.conftest import REPO


def one_line_error(result) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    return result.stderr


def test_the_first_retrain_makes_a_champion_only_because_promote_was_given(operations_loop):
    loop = operations_loop
    assert loop.first.returncode == 0, loop.first.stdout[-3000:] + loop.first.stderr[-3000:]
    assert "the first challenger comes from the full sweep" not in loop.first.stdout  # --mode full was asked
    assert "first champion, forced with --promote: its verdict does not support an edge" in loop.first.stdout
    champion = loop.client.get_model_version_by_alias(loop.model, "champion")
    assert str(champion.version) == "1"
    tags = champion.tags
    assert tags["champion_forced"] == "true" and tags["retrain/mode"] == "full" and tags["parent_version"] == "none"
    assert champion.description.startswith("first champion, forced with --promote")
    # It trained on the held-back data minus the forward window: its data ends 720 bars before the file's end.
    from envs.trading.data import load_bars

    held_back = load_bars(REPO / "data" / "raw" / "BTC-USD_1h.parquet").iloc[:-1440]
    assert pd.Timestamp(tags["data_end"]) == held_back.index[-721]
    assert pd.Timestamp(tags["forward_start"]) == held_back.index[-720]


def test_a_retrain_without_fresh_bars_is_refused_in_one_line_and_changes_nothing(operations_loop):
    loop = operations_loop
    error = one_line_error(loop.too_early)
    assert "the forward test needs 720 bars after the champion's data ended" in error
    assert "the data has 0" in error and "experiments.data update" in error
    assert "challenger:" not in loop.too_early.stdout  # refused before anything trained or was registered


def test_an_incremental_retrain_warm_starts_and_is_judged_against_the_champion(operations_loop):
    loop = operations_loop
    assert loop.update.returncode == 0 and "appended 1440 1h bars" in loop.update.stdout
    out = loop.second.stdout
    assert loop.second.returncode == 0, out[-3000:] + loop.second.stderr[-3000:]
    assert "warm start from models:/dqn_btc-smoke/1's checkpoint" in out and "the replay buffer starts empty" in out
    assert "forward test" in out and "champion" in out and "buy_and_hold" in out
    client = loop.client
    challenger = client.get_model_version(loop.model, "2")
    tags = challenger.tags
    assert tags["parent_version"] == "1" and tags["retrain/mode"] == "incremental"
    # The forward window: the newest 720 bars, all after the bars the champion trained and was promoted on
    champion_end = pd.Timestamp(client.get_model_version(loop.model, "1").tags["forward_end"])
    assert pd.Timestamp(tags["forward_start"]) > champion_end
    assert pd.Timestamp(tags["data_end"]) < pd.Timestamp(tags["forward_start"])
    numbers = {k.split("/", 1)[1]: float(v) for k, v in tags.items() if k.startswith("gate/")}
    assert {"forward_sharpe", "champion_forward_sharpe", "dsr_vs_champion", "dsr_vs_buy_and_hold",
            "excess_sharpe_vs_champion"} <= set(numbers)
    aliases = client.get_registered_model(loop.model).aliases
    # The shipped gate (DSR 0.95 over 720 bars) is not met by a smoke-trained challenger: it stays a challenger,
    # with the reason on the version, and the champion keeps its alias.
    assert aliases == {"champion": 1, "challenger": 2}
    assert tags["promotion"].startswith("not promoted: ") and challenger.description == tags["promotion"]
    assert "models:/dqn_btc-smoke/2 -> @challenger: not promoted" in out


def test_the_registered_champion_acts_from_raw_bars_as_the_env_does_on_every_bar_of_its_test_window(operations_loop):
    """The model from the registry (features and normalization carried) against the env of the fold it was trained
    and scored on, walked with the scorer's policy: the same action on every decision of the test window."""
    import mlflow

    from envs.trading.data import load_bars
    from envs.trading.env import SpotTradingEnv
    from experiments.api.preflight import load

    loop = operations_loop
    version = loop.client.get_model_version(loop.model, "1")
    mlflow.set_tracking_uri(loop.tracking_uri)
    model = mlflow.pyfunc.load_model(f"models:/{loop.model}/1")
    trained_on = loop.client.get_run(version.run_id).data.params["environment.env_config.data_path"]
    exp = load(REPO / "conf" / "dqn_btc.yaml", [f"environment.env_config.data_path={trained_on}"], True)
    env = SpotTradingEnv({**exp.environment.env_config, "fold": int(version.tags["fold"]), "split": "test",
                          "episode_length": None})
    bars = load_bars(trained_on)
    policy = model.unwrap_python_model().policy  # the scorer's numpy forward pass
    obs, info = env.reset(seed=0)
    decisions = []
    while True:
        row = info["row"]
        frame = bars.iloc[:row + 1].assign(position=info["position"]).reset_index()
        decided = int(model.predict(frame)["action"].iloc[0])
        action = int(policy(obs[None])[0])
        decisions.append((decided, action))
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    assert len(decisions) > 50 and all(d == a for d, a in decisions)
    assert pd.Timestamp(version.tags["test_start"]) == bars.index[env.market.bounds["test"][0]]
    assert np.isfinite(float(version.tags.get("gate/forward_sharpe", "nan")))
