"""Env families are objects with typed abilities (envs/families.py, envs/abilities.py), listed once in
`envs.FAMILIES`: the platform asks `isinstance(family, Ability)` and never loads a "module:attr" string."""
from __future__ import annotations

import inspect
import re
import subprocess
import sys
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import envs
from envs import abilities
from envs.baselines import Baseline
from envs.errors import InputError
from envs.families import EnvFamily, GymFamily
from envs.portfolio.family import PortfolioFamily
from envs.trading.family import SpotFamily, TradingFamily
from envs.validation import StrictModel
from tests.conftest import REPO

ENTRY_POINT = re.compile(r"^[\w.]+:\w+$")
ABILITIES = sorted((cls for _, cls in inspect.getmembers(abilities, inspect.isclass)
                    if cls.__module__ == abilities.__name__), key=lambda cls: cls.__name__)


def test_the_table_is_the_flat_list_and_every_id_is_registered():
    ids = [family.env_id for family in envs.FAMILIES]
    assert len(set(ids)) == len(ids) and list(envs.ENVIRONMENTS) == ids
    for family in envs.FAMILIES:
        assert isinstance(family, EnvFamily) and family.env_id in gym.registry
        assert envs.family(family.env_id) is family


def test_no_family_names_its_parts_by_string():
    """Every attribute of a family, through its classes, is a value or a method; none is a "module:attr" string."""
    for family in envs.FAMILIES:
        for cls in type(family).__mro__:
            for name, value in vars(cls).items():
                assert not (isinstance(value, str) and ENTRY_POINT.match(value)), f"{cls.__name__}.{name} = {value!r}"
        spec = gym.registry[family.env_id]
        assert callable(spec.entry_point) and not isinstance(spec.entry_point, str)


def test_every_family_brings_what_the_base_promises():
    for family in envs.FAMILIES:
        assert issubclass(family.env_class(), gym.Env), family
        assert issubclass(family.config_model(), StrictModel), family
        assert callable(family.evaluator()), family
        table = family.baseline_table()
        assert table and all(isinstance(baseline, Baseline) for baseline in table), family


def test_each_ability_gives_what_its_signature_says():
    for family in envs.FAMILIES:
        if isinstance(family, abilities.ServesRawInputs):
            reader = family.reader_class()
            assert all(callable(getattr(reader, name, None)) for name in ("for_env_config", "load", "accepts",
                                                                            "decide")), family
        if isinstance(family, abilities.PaperTrades):
            assert callable(family.paper_market().open), family
        if isinstance(family, abilities.HasBars):
            assert family.timeframe({family.timeframe_key: "4h"}) == "4h"
        if isinstance(family, abilities.ScoresValidation):
            assert family.validation_keys and callable(family.validation_scores)
        if isinstance(family, abilities.Backtests):
            assert hasattr(family.env_class(), "split_periods"), family


def test_a_plain_gymnasium_id_has_no_ability():
    plain = envs.family("CartPole-v1")
    assert isinstance(plain, GymFamily) and plain.env_id == "CartPole-v1"
    assert not any(isinstance(plain, ability) for ability in ABILITIES)
    assert plain.evaluator() is None and plain.baseline_table() == () and plain.config_model() is None
    assert plain.env_class() is gym.make("CartPole-v1").unwrapped.__class__
    assert plain.run_tags({}) == {"data": "CartPole-v1"}


def test_families_own_their_tags_data_and_timeframe():
    config = {"symbol": "SOL-USD", "timeframe": "4h", "data_path": None, "source": "synthetic"}
    spot = envs.family("trading/Spot-v0")
    assert spot.run_tags(config) == {"symbol": "SOL-USD", "data": "SOL-USD"}
    assert spot.timeframe(config) == "4h"
    assert not isinstance(envs.family("agents/TestPrioritization-v0"), abilities.HasBars)
    assert envs.family("agents/TestPrioritization-v0").data_label({"data_path": "/x/ci.csv"}) == "/x/ci.csv"


def test_attaching_the_feature_store_returns_a_new_env_config():
    spot = envs.family("trading/Spot-v0")
    config = {"symbol": "BTC-USD"}
    attached = spot.attach_store(config, "/runs/features")
    assert attached == {"symbol": "BTC-USD", "feature_store": "/runs/features"} and config == {"symbol": "BTC-USD"}
    named = {"feature_store": "/mine"}
    assert spot.attach_store(named, "/runs/features") == named


def test_the_portfolio_family_extends_the_trading_one():
    """What both trading families share (folds, bars, the feature store, serving, paper trading, the direct learner's
    book) is written once, in TradingFamily."""
    portfolio, spot = envs.family("trading/Portfolio-v0"), envs.family("trading/Spot-v0")
    assert isinstance(portfolio, PortfolioFamily) and isinstance(portfolio, TradingFamily)
    assert isinstance(spot, SpotFamily) and isinstance(spot, TradingFamily)
    shared = {ability for ability in ABILITIES if issubclass(TradingFamily, ability)}
    assert {abilities.Backtests, abilities.HasBars, abilities.PaperTrades, abilities.TrainsThroughBook} <= shared
    assert portfolio.unused_with_protocol == spot.unused_with_protocol and "unused_with_protocol" not in vars(
        PortfolioFamily)


def test_a_family_that_forgets_an_abilitys_method_cannot_be_built():
    class Forgetful(abilities.PaperTrades, EnvFamily):
        env_id = "Forgetful-v0"

        def reader_class(self) -> Any:
            return object

    with pytest.raises(TypeError, match="paper_market"):
        Forgetful()

    class Classless(EnvFamily):
        env_id = "Classless-v0"

    with pytest.raises(TypeError, match="env_class"):
        Classless()


def test_reading_the_table_imports_no_env_module_torch_or_ray():
    code = ("import sys, envs\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('ray', 'torch') or m in "
            "('envs.trading.env', 'envs.portfolio.env', 'envs.agents.testprio.env', 'envs.agents.testgen.env')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_new_family_is_one_object(monkeypatch):
    """DESIGN's "Adding an env family", followed: a class over the base, one object, one entry in the list; the env
    is then made, checked and scored through the platform's one path."""
    from envs.report import EvaluationReport

    class Coin(gym.Env):
        def __init__(self, config: dict[str, Any] | None = None) -> None:
            self.observation_space = gym.spaces.Box(-1, 1, (1,), np.float32)
            self.action_space = gym.spaces.Discrete(2)

    class CoinConfig(StrictModel):
        bias: float = 0.5

    class CoinFamily(EnvFamily):
        env_id = "test/Coin-v0"

        def env_class(self) -> type[gym.Env]:
            return Coin

        def config_model(self) -> type[StrictModel]:
            return CoinConfig

        def evaluator(self) -> Any:
            return lambda policy, env_config: EvaluationReport.__new__(EvaluationReport)

    coin = CoinFamily()
    monkeypatch.setattr(envs, "ENVIRONMENTS", {**envs.ENVIRONMENTS, coin.env_id: coin})
    coin.register()
    try:
        assert envs.family(coin.env_id) is coin
        assert isinstance(envs.make_env(coin.env_id, {"bias": 0.3}).unwrapped, Coin)
        with pytest.raises(InputError, match="did you mean"):
            coin.check_config({"biass": 0.3}, "coin.yaml")
    finally:
        gym.registry.pop(coin.env_id, None)


def test_design_says_which_family_has_which_ability():
    """docs/DESIGN.md's table of families and abilities is the code's."""
    text = (REPO / "docs" / "DESIGN.md").read_text()
    table = text.split("<!-- abilities table -->", 2)[1]
    rows = [line.strip("|").split("|") for line in table.strip().splitlines() if line.startswith("| `")]
    header = [cell.strip() for cell in table.strip().splitlines()[0].strip("|").split("|")][1:]
    assert header == [ability.__name__ for ability in ABILITIES]
    documented = {row[0].strip().strip("`"): [cell.strip() == "yes" for cell in row[1:]] for row in rows}
    assert documented == {family.env_id: [isinstance(family, ability) for ability in ABILITIES]
                          for family in envs.FAMILIES}
