"""`trading/Spot-v0` as a native vector env: N sub-envs stepped by numpy in one call.

A Python `gym.Env.step` costs a few microseconds however little it computes (method calls, the info
dict, a fresh observation), and gymnasium's SyncVectorEnv adds its own loop and info merging on top.
Here the N sub-envs are columns of arrays: one market loaded once, the ledger's fill arithmetic
vectorized, observations gathered with one fancy index. Results are those of N `SpotTradingEnv`s in a
`SyncVectorEnv` with next-step autoreset, bit for bit (`tests/unit/test_trading_vector_env.py`):
the same seeds (sub-env i is seeded with seed + i), the same episode starts, the same fills at the
next bar's open with slippage and fees, the same observations, rewards and infos. The reward's log is
`math.log` per sub-env, because numpy's vectorized log differs from it in the last bit for ~3% of inputs.

RLlib's env runners get this env through `gym_env_vectorize_mode="vector_entry_point"` (algos/dqn.py).
"""
from __future__ import annotations

import math
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from envs.errors import InputError
from envs.trading.env import POSITION_SETS, Market, TradingConfig, load_market

INFO_KEYS = ("equity", "position", "fees_paid", "trades", "row")


class SpotTradingVectorEnv(gym.vector.VectorEnv):
    metadata: ClassVar[dict[str, Any]] = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(self, config: dict[str, Any] | None = None, num_envs: int = 1, market: Market | None = None) -> None:
        config = dict(config or {})
        num_envs = int(config.pop("num_envs", num_envs))
        if num_envs < 1:
            raise InputError(f"trading env: num_envs must be >= 1, got {num_envs}")
        self.num_envs = num_envs
        self.cfg = TradingConfig.from_dict(config)
        self.market = market or load_market(self.cfg)
        self.targets = np.array(POSITION_SETS[self.cfg.positions])
        n_features = self.market.features.shape[1]
        self.single_action_space = gym.spaces.Discrete(len(self.targets))
        self.single_observation_space = gym.spaces.Box(
            -10.0, 10.0, shape=(self.cfg.window * n_features + len(self.targets),), dtype=np.float32)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self._lo, self._hi = self.market.bounds[self.cfg.split]
        self._features = np.ascontiguousarray(self.market.features, dtype=np.float32)
        self._window_offsets = np.arange(1 - self.cfg.window, 1)
        self._position_eye = np.eye(len(self.targets), dtype=np.float32)
        self._flat_index = int(np.flatnonzero(self.targets == 0.0)[0])
        self._opens, self._closes = self.market.opens.astype(np.float64), self.market.closes.astype(np.float64)
        self.fee_rate = self.cfg.fee_bps / 1e4
        self.slippage_rate = self.cfg.slippage_bps / 1e4
        self._rngs: list[np.random.Generator | None] = [None] * num_envs
        shape = (num_envs,)
        self._t, self._end = np.zeros(shape, dtype=np.int64), np.zeros(shape, dtype=np.int64)
        self._action_index = np.full(shape, self._flat_index, dtype=np.int64)
        self._equity, self._cash, self._units = np.ones(shape), np.ones(shape), np.zeros(shape)
        self._position, self._fees_paid = np.zeros(shape), np.zeros(shape)
        self._trades = np.zeros(shape, dtype=np.int64)
        self._autoreset = np.zeros(shape, dtype=bool)

    def split_periods(self) -> dict[str, tuple[str, str]]:
        stamps = self.market.timestamps
        return {name: (f"{stamps[lo]:%Y-%m-%d}", f"{stamps[hi - 1]:%Y-%m-%d}")
                for name, (lo, hi) in self.market.bounds.items()}

    def reset(self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None):
        seeds = [seed + i for i in range(self.num_envs)] if isinstance(seed, int) else (seed or [None] * self.num_envs)
        for i, sub_seed in enumerate(seeds):
            if sub_seed is not None or self._rngs[i] is None:  # as gymnasium.Env.reset seeds np_random
                self._rngs[i], _ = seeding.np_random(sub_seed)
        self._reset_envs(np.ones(self.num_envs, dtype=bool))
        self._autoreset[:] = False
        return self._observations(), self._infos()

    def step(self, actions: np.ndarray):
        actions = np.asarray(actions, dtype=np.int64).reshape(self.num_envs)
        resetting = self._autoreset
        stepping = np.flatnonzero(~resetting)  # sub-envs whose episode goes on (the others restart now)
        rewards = np.zeros(self.num_envs)
        if stepping.size:
            chosen = actions[stepping]
            self._trade(stepping[chosen != self._action_index[stepping]], actions)
            next_row = np.minimum(self._t[stepping] + self.cfg.decision_interval, self._end[stepping])
            equity = self._cash[stepping] + self._units[stepping] * self._closes[next_row]
            scale = self.cfg.reward_scale
            rewards[stepping] = [math.log(r) * scale for r in (equity / self._equity[stepping]).tolist()]
            self._equity[stepping] = equity
            self._action_index[stepping] = chosen
            self._t[stepping] = next_row
        if resetting.any():
            self._reset_envs(resetting)
        truncated = (self._t >= self._end) & ~resetting
        self._autoreset = truncated.copy()
        return self._observations(), rewards, np.zeros(self.num_envs, dtype=bool), truncated, self._infos()

    def _reset_envs(self, mask: np.ndarray) -> None:
        for i in np.flatnonzero(mask):
            self._t[i], self._end[i] = self._episode_bounds(self._rngs[i])
        self._action_index[mask] = self._flat_index
        for array, value in ((self._equity, 1.0), (self._cash, 1.0), (self._units, 0.0), (self._position, 0.0),
                             (self._fees_paid, 0.0), (self._trades, 0)):
            array[mask] = value

    def _episode_bounds(self, rng: np.random.Generator) -> tuple[int, int]:
        """SpotTradingEnv._episode_bounds with this sub-env's generator (the same draw)."""
        last_row = self._hi - 1
        length = self.cfg.episode_length
        if length is None or self.cfg.split != "train" or last_row - self._lo <= length:
            return self._lo, last_row
        start = int(rng.integers(self._lo, last_row - length + 1))
        return start, start + length

    def _trade(self, changing: np.ndarray, actions: np.ndarray) -> None:
        """`Ledger.rebalance` for the sub-envs `changing` (indices) at the next bar's open: close the held
        position, then open the new target with the cash left after fees (the same operations, same order)."""
        if not changing.size:
            return
        opens = self._opens[self._t[changing] + 1]
        cash, units = self._cash[changing], self._units[changing]
        fees, trades = self._fees_paid[changing], self._trades[changing]
        closing = units != 0.0
        if closing.any():
            self._fill(closing, -units[closing], opens[closing], cash, fees, trades)
            units[closing] = 0.0  # exact zero, as the ledger
        target = self.targets[actions[changing]]
        opening = target != 0.0
        if opening.any():
            wanted = target[opening]
            side_price = opens[opening] * np.where(wanted > 0, 1.0 + self.slippage_rate, 1.0 - self.slippage_rate)
            bought = np.copysign(np.abs(wanted) * cash[opening] / (1.0 + self.fee_rate) / side_price, wanted)
            self._fill(opening, bought, opens[opening], cash, fees, trades)
            units[opening] = bought  # 0.0 + bought, as the ledger adds to a flat position
        self._cash[changing], self._units[changing] = cash, units
        self._fees_paid[changing], self._trades[changing] = fees, trades
        self._position[changing] = target

    def _fill(self, which: np.ndarray, units: np.ndarray, opens: np.ndarray, cash: np.ndarray, fees: np.ndarray,
              trades: np.ndarray) -> None:
        """`Ledger._fill` on the `which` entries of cash/fees/trades: buy (units > 0) or sell at the open,
        with slippage and fee."""
        price = opens * np.where(units > 0, 1.0 + self.slippage_rate, 1.0 - self.slippage_rate)
        fee = np.abs(units) * price * self.fee_rate
        cash[which] = cash[which] - (units * price + fee)
        fees[which] = fees[which] + fee
        trades[which] += 1

    def _observations(self) -> np.ndarray:
        rows = self._t[:, None] + self._window_offsets
        window = self._features[rows].reshape(self.num_envs, -1)
        return np.concatenate([window, self._position_eye[self._action_index]], axis=1)

    def _infos(self) -> dict[str, np.ndarray]:
        """The single env's info in gymnasium's vector layout: one array per key and a `_key` mask."""
        values = {"equity": self._equity.copy(), "position": self._position.copy(),
                  "fees_paid": self._fees_paid.copy(), "trades": self._trades.copy(), "row": self._t.copy()}
        every = np.ones(self.num_envs, dtype=bool)  # every sub-env reports every key (one read-only mask)
        every.flags.writeable = False
        infos: dict[str, np.ndarray] = {}
        for key in INFO_KEYS:
            infos[key] = values[key]
            infos[f"_{key}"] = every
        return infos
