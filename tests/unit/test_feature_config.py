"""Feature lists in the experiment file: what a dry run prints, and every mistake as one line, exit 2, nothing
written."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments.run import main
from tests.conftest import REPO

CONF = REPO / "conf" / "dqn_btc.yaml"
DAILY = REPO / "data" / "raw" / "BTC-USD_1d.parquet"
BITFINEX_ETH = REPO / "data" / "raw" / "bitfinex" / "ETH-USD_1h.parquet"


def dry_run(capsys, tmp_path: Path, features: str, conf: Path = CONF) -> tuple[int, str, str, Path]:
    out = tmp_path / "out"
    code = main([str(conf), "--dry-run", "--output", str(out), "--set", f"environment.env_config.features={features}"])
    stdout, stderr = capsys.readouterr()
    return code, stdout, stderr, out


@pytest.fixture
def no_time_column(tmp_path: Path) -> Path:
    path = tmp_path / "no_time.csv"
    pd.DataFrame({"x": [1.0, 2.0], "y": [3.0, 4.0]}).to_csv(path, index=False)
    return path


@pytest.mark.parametrize("features, fragment", [
    ("[{ta: RSX}]", "ta: 'RSX' is not a TA-Lib function: did you mean 'RSI'?"),
    ("[{ta: RSI, timeperod: 3}]", "RSI has no parameter 'timeperod': did you mean 'timeperiod'?"),
    ("[{ta: MACD, outputs: [hist]}]", "MACD has no output 'hist': did you mean 'macdhist'?"),
    ("[{ta: RSI, timeperiod: fourteen}]", "RSI timeperiod: 'fourteen' is not an integer"),
    ("[{ta: OBV}]", "OBV cannot be a feature: its value at a bar depends on where the series starts"),
    ("[{ta: MAVP}]", "MAVP cannot be a feature: it needs a periods input"),
    ("[basci]", "'basci' is neither a feature set nor a transform: did you mean 'basic'?"),
    ("[{transform: trend, windw: 5}]", "transform trend has no parameter 'windw': did you mean 'window'?"),
    ("[{resample: 3h, features: [basic]}]", "resample: '3h' is not a timeframe"),
    (f"[{{asset: {DAILY}, features: [log_return]}}]", "holds 1d bars, the bars it is aligned to are 1h"),
    (f"[{{asset: {BITFINEX_ETH}, features: [log_return]}}]", "before the data's last bar"),
    (f"[{{asset: {BITFINEX_ETH}, missing: fill, features: [log_return]}}]", "did you mean 'ffill'?"),
    ("[{series: SERIES}]", "lag: missing: say when each value became known"),
    ("[{series: SERIES, lag: -1d}]", "lag: '-1d' is negative"),
    ("[{series: SERIES, lag: soon}]", "lag: 'soon' is not a duration"),
    ("[{series: NO_TIME, lag: 1d}]", "no timestamps: the series needs a time column"),
    ("[basic, {ta: SMA, timeperiod: 14000}]", "warm-up 14000 bars leaves 0 bars of the train part"),
])
def test_a_bad_feature_list_is_one_line_exit_2_and_nothing_written(capsys, tmp_path, no_time_column, features,
                                                                    fragment):
    series = REPO / "data" / "outside" / "SP500_1d.csv"
    features = features.replace("NO_TIME", str(no_time_column)).replace("SERIES", str(series))
    code, stdout, stderr, out = dry_run(capsys, tmp_path, features)
    assert code == 2, stdout + stderr
    assert fragment in stderr and len(stderr.strip().splitlines()) == 1, stderr
    assert "Traceback" not in stderr
    assert not out.exists()


def test_the_plan_prints_every_feature_and_its_warm_up_and_where_it_came_from(capsys, tmp_path):
    import envs.trading.env as env_module
    from envs.trading.features import store

    research = REPO / "conf" / "dqn_btc_research.yaml"
    out = tmp_path / "out"
    assert main([str(research), "--dry-run", "--output", str(out)]) == 0
    first = capsys.readouterr().out
    assert "features: 21 columns of 19 feature(s), warm-up 669 bars; computed" in first
    for name in ("RSI(14) 167", "MACD(12,26,9) 360", "4h:RSI(14) 669", "1d:trend_20", "ETH:log_return",
                 "SP500:log_return"):
        assert name in first
    stored = list((out / "features").glob("*.arrow"))
    assert len(stored) == 1
    store._memory.clear()  # as a new process would start: only the store on disk holds them
    env_module._normalized_cache.clear()
    assert main([str(research), "--dry-run", "--output", str(out)]) == 0
    assert "features: 21 columns of 19 feature(s), warm-up 669 bars; read from the feature store" in (
        capsys.readouterr().out)


def test_the_feature_store_gives_back_what_was_computed_and_is_keyed_by_content(tmp_path):
    import envs.trading.env as env_module
    from envs.trading.env import TradingConfig, load_market
    from envs.trading.features import store

    items = ["basic", {"ta": "MACD"}, {"resample": "4h", "features": [{"ta": "RSI"}]}]
    config = {"features": items, "feature_store": str(tmp_path / "features")}
    first = load_market(TradingConfig.from_dict(config))
    store._memory.clear()
    env_module._normalized_cache.clear()
    again = load_market(TradingConfig.from_dict(config))
    assert (first.feature_origin, again.feature_origin) == ("computed", "cache")
    assert np.array_equal(first.features, again.features) and first.feature_names == again.feature_names
    other = load_market(TradingConfig.from_dict({**config, "features": [*items, "range"]}))
    assert other.feature_key != first.feature_key and other.feature_origin == "computed"
    assert len(list((tmp_path / "features").glob("*.arrow"))) == 2
    assert not list((tmp_path / "features").glob("*.tmp"))


def test_importance_is_the_validation_return_lost_when_one_feature_is_permuted():
    """A policy that reads one feature loses return only when that feature is permuted."""
    import numpy as np

    from envs.trading.env import SpotTradingEnv
    from envs.trading.importance import permutation_importance

    config = {"window": 1, "decision_interval": 24}
    env = SpotTradingEnv({**config, "split": "validation"})
    column = env.market.feature_names.index("trend_24")

    def policy(observations: np.ndarray) -> np.ndarray:  # long when the close is above its 24-bar mean
        return (observations[:, column] > 0).astype(np.int64)

    table = permutation_importance(policy, config, repeats=2)
    assert list(table.index) == list(env.market.feature_names)
    others = table.drop(index="trend_24")["drop_mean"]
    assert (others == 0.0).all() and table.loc["trend_24", "drop_mean"] != 0.0


@pytest.mark.parametrize("conf", sorted((REPO / "conf" / "study").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_hypothesis_of_the_study_dry_runs(conf, tmp_path, capsys):
    assert main([str(conf), "--dry-run", "--output", str(tmp_path)]) == 0
    assert "features:" in capsys.readouterr().out


def test_a_refusal_found_in_the_data_names_the_experiment_file_and_the_block_not_a_shifted_index(capsys, tmp_path):
    """A series that ends long before the bars is found only when the data is read: the line names the experiment
    file and the key as the file's validation does, and the block by its kind and file (an index would count the
    items `basic` expands into: it said features[8] for the list's second item)."""
    short = tmp_path / "sp_short.csv"
    short.write_text("\n".join((REPO / "data" / "outside" / "SP500_1d.csv").read_text().splitlines()[:400]) + "\n")
    features = f"[basic, {{series: {short}, lag: 1d, features: [log_return]}}]"
    code, stdout, stderr, out = dry_run(capsys, tmp_path, features)
    assert code == 2 and len(stderr.strip().splitlines()) == 1 and not out.exists()
    assert stderr.startswith(f"error: {CONF}: environment.env_config.features: series: {short}'s last value is "
                             "published at"), stderr
    assert "[" not in stderr.split("'s last value")[0]
