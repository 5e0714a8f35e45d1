"""The direct learner's table entry: what it refuses before Ray starts, how it draws its batches, and that its update
climbs the log growth of a planted universe (no Ray: the problem and a portfolio net on their own)."""
from __future__ import annotations

import numpy as np
import pytest

import algos
import envs
from algos.direct.batches import geometric_start
from envs.errors import InputError

DIRECT = algos.algorithm("direct")
SPOT = {"source": "synthetic", "positions": "continuous", "min_trade": 0.0, "window": 4}
UNIVERSE = {"source": "synthetic", "synthetic_assets": 4, "synthetic_bars": 2000, "window": 5, "decision_interval": 4,
            "fee_bps": 10, "slippage_bps": 0,
            "protocol": {"type": "walk_forward", "folds": 1, "validation_size": 300, "test_size": 300}}


def _training(**keys: object) -> object:
    return DIRECT.training_section(**keys)


def _check(env_id: str, config: dict, **training: object) -> None:
    DIRECT.check_env(envs.make_env(env_id, config), env_id, _training(**training))


def test_a_spot_env_with_continuous_positions_and_no_dead_band_is_accepted() -> None:
    _check("trading/Spot-v0", SPOT)
    _check("trading/Portfolio-v0", UNIVERSE, model="shared_assets")


@pytest.mark.parametrize(("env_id", "config", "training", "says"), [
    ("trading/Spot-v0", {**SPOT, "min_trade": 0.05}, {}, "min_trade: 0.05 is a dead band with no gradient"),
    ("trading/Spot-v0", {**SPOT, "positions": "long_flat", "min_trade": 0.02}, {}, "needs positions: continuous"),
    ("trading/Spot-v0", SPOT, {"train_batch_size_per_learner": 10**6}, "is longer than the train part's"),
    ("trading/Portfolio-v0", UNIVERSE, {"train_batch_size_per_learner": 10**5, "model": "shared_assets"},
     "is longer than the train part's"),
    ("trading/Portfolio-v0", UNIVERSE, {}, "set training.model: shared_assets"),
    ("Pendulum-v1", {}, {}, "Pendulum-v1 has none"),
])
def test_what_the_direct_learner_cannot_train_is_refused_in_one_line(env_id: str, config: dict, training: dict,
                                                                     says: str) -> None:
    with pytest.raises(InputError) as refused:
        _check(env_id, config, **training)
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_discrete_actions_are_not_among_its_action_spaces() -> None:
    import gymnasium as gym

    assert not DIRECT.supports(gym.spaces.Discrete(3)) and DIRECT.supports(gym.spaces.Box(-1, 1, (3,)))


def test_geometric_starts_favour_the_recent_end_and_cover_every_start() -> None:
    rng = np.random.default_rng(0)
    starts = np.array([geometric_start(rng, 399, 0.01) for _ in range(20_000)])
    assert starts.min() >= 0 and starts.max() == 399
    # P(k0) ~ 0.99^(399 - k0): the last 100 starts hold 1 - 0.99^100 = 63% of the mass (of 1 - 0.99^400 = 98%)
    share = np.mean(starts >= 300)
    assert abs(share - (1 - 0.99 ** 100) / (1 - 0.99 ** 400)) < 0.02
    assert geometric_start(rng, 0, 0.01) == 0

