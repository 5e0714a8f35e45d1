"""`trading/Spot-v0` as a native vector env: N sub-envs stepped by numpy in one call.

A Python `gym.Env.step` costs a few microseconds however little it computes (method calls, the info
dict, a fresh observation), and gymnasium's SyncVectorEnv adds its own loop and info merging on top.
Here the N sub-envs are columns of arrays: one market loaded once, the ledger's fill arithmetic
vectorized, observations gathered with one fancy index. Results are those of N `SpotTradingEnv`s in a
`SyncVectorEnv` with next-step autoreset, bit for bit (`tests/unit/test_trading_vector_env.py`):
the same seeds (sub-env i is seeded with seed + i), the same episode starts, the same fills at the
next bar's open with slippage and fees, the same margin calls (per sub-env terminations), the same
observations, rewards and infos, for discrete position sets and continuous exposures alike
(`tests/unit/test_continuous_positions.py`). The reward's log is
`math.log` per sub-env, because numpy's vectorized log (SIMD) differs from it in the last bit for ~4%
of inputs; the single env keeps its fast `math.log` on a Python float.

A step costs a fixed ~20-30 µs of numpy calls plus well under a µs per sub-env, so the more sub-envs per
call, the cheaper an env step. RLlib's env runners get this env through
`gym_env_vectorize_mode="vector_entry_point"` (algos/dqn.py).
"""
from __future__ import annotations

import math
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space
from numpy.lib.stride_tricks import sliding_window_view

from envs.errors import InputError
from envs.trading.env import Market, TradingConfig, action_space, load_market, position_width, split_periods
from envs.trading.ledger import EQUITY_FLOOR
from envs.trading.positions import EXPOSURE_BOUNDS, POSITION_SETS, can_short, is_continuous

INFO_KEYS = ("equity", "position", "fees_paid", "trades", "row", "margin_call")


class SpotTradingVectorEnv(gym.vector.VectorEnv):
    """N `SpotTradingEnv`s on one market: per-sub-env state is one array per `Ledger`/env field."""

    metadata: ClassVar[dict[str, Any]] = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(self, config: dict[str, Any] | None = None, num_envs: int = 1, market: Market | None = None) -> None:
        config = dict(config or {})
        num_envs = int(config.pop("num_envs", num_envs))
        if num_envs < 1:
            raise InputError(f"trading env: num_envs must be >= 1, got {num_envs}")
        self.num_envs = num_envs
        self.cfg = TradingConfig.from_dict(config)
        self.market = market or load_market(self.cfg)  # one market for all sub-envs
        positions = self.cfg.positions
        self.continuous = is_continuous(positions)
        self.bounds = EXPOSURE_BOUNDS.get(positions)  # (low, high) of a continuous exposure; None for a set
        self.targets = np.array(POSITION_SETS.get(positions, ()))  # a set's targets by action index (none if continuous)
        n_features = self.market.features.shape[1]
        self.single_action_space = action_space(positions)
        self.single_observation_space = gym.spaces.Box(
            -10.0, 10.0, shape=(self.cfg.window * n_features + position_width(positions),), dtype=np.float32)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self._lo, self._hi = self.market.bounds[self.cfg.split]
        # Row r of `_windows` is the flat run of feature rows r .. r + window - 1 (a strided view, no copy), so the
        # observation windows of all sub-envs are one fancy index.
        flat = np.ascontiguousarray(self.market.features, dtype=np.float32).reshape(-1)
        self._windows = sliding_window_view(flat, self.cfg.window * n_features)[::n_features]
        self._position_eye = np.eye(len(self.targets), dtype=np.float32)
        self._flat_index = int(np.flatnonzero(self.targets == 0.0)[0]) if len(self.targets) else 0
        # One padding bar: step() gathers "the next open" for every sub-env, also one about to reset at the data's
        # last row (its fill is masked out; only reachable if sub-envs were out of step on a held-out split).
        self._opens = np.append(self.market.opens.astype(np.float64), np.nan)
        self._closes = self.market.closes.astype(np.float64)
        self.fee_rate = self.cfg.fee_bps / 1e4
        self.slippage_rate = self.cfg.slippage_bps / 1e4
        self.maintenance_margin = self.cfg.maintenance_margin
        up, down = 1.0 + self.slippage_rate, 1.0 - self.slippage_rate  # Ledger's buy and sell price factors
        self._buy_factor = up  # a margin call buys the short back
        # Every bar's open and close in time order (open 0, close 0, open 1, ...): the marks of a short held from the
        # fill of a decision at row t are the run 2t + 3 (bar t+1's close, after the fill at its open) .. 2t + 2k + 1
        # (bar t+k's close), k = decision_interval; `_held` are those offsets from 2t (None for k = 1: the close 2t + 3
        # of the step's only bar).
        self._marks = np.stack((self.market.opens, self.market.closes), axis=1).astype(np.float64).reshape(-1)
        interval = self.cfg.decision_interval
        self._held = np.arange(3, 2 * interval + 2) if interval > 1 else None
        self._can_short = can_short(positions)  # long_flat and continuous never borrow: no margin checks at all
        # Lookup tables by action index instead of np.where on signs (same factors, several times cheaper):
        # closing a short buys, closing a long sells; opening a long buys, opening a short sells.
        self._close_factor = np.where(self.targets < 0, up, down)
        self._open_factor = np.where(self.targets > 0, up, down)
        self._rngs: list[np.random.Generator | None] = [None] * num_envs
        shape = (num_envs,)
        self._t, self._end = np.zeros(shape, dtype=np.int64), np.zeros(shape, dtype=np.int64)
        self._action_index = np.full(shape, self._flat_index, dtype=np.int64)
        self._equity, self._cash, self._units = np.ones(shape), np.ones(shape), np.zeros(shape)
        self._position, self._fees_paid = np.zeros(shape), np.zeros(shape)
        self._trades = np.zeros(shape, dtype=np.int64)
        self._margin_call = np.zeros(shape, dtype=bool)
        self._liquidation_price = np.full(shape, np.inf)  # Ledger.liquidation_price per sub-env
        self._autoreset = np.zeros(shape, dtype=bool)
        self._any_autoreset = False
        self._every = np.ones(shape, dtype=bool)  # the infos' `_key` masks: every sub-env reports every key
        self._every.flags.writeable = False

    def split_periods(self) -> dict[str, tuple[str, str]]:
        return split_periods(self.market)

    def reset(self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None):
        seeds = [seed + i for i in range(self.num_envs)] if isinstance(seed, int) else (seed or [None] * self.num_envs)
        if len(seeds) != self.num_envs:
            raise InputError(f"trading env: {len(seeds)} seeds for {self.num_envs} envs")
        for i, sub_seed in enumerate(seeds):
            if sub_seed is not None or self._rngs[i] is None:  # as gymnasium.Env.reset seeds np_random
                self._rngs[i], _ = seeding.np_random(sub_seed)
        self._reset_envs(np.ones(self.num_envs, dtype=bool))
        self._autoreset = np.zeros(self.num_envs, dtype=bool)
        self._any_autoreset = False
        return self._observations(), self._infos()

    def step(self, actions: np.ndarray):
        if self.continuous:
            actions = self._exposure_targets(actions)
            # Ledger.rebalance's test: the target differs from the held one by min_trade or more
            changing = (actions != self._position) & (np.abs(actions - self._position) >= self.cfg.min_trade)
        else:
            actions = np.array(actions, dtype=np.int64).reshape(self.num_envs)  # a copy: kept as state
            changing = actions != self._action_index  # the target changes (else Ledger.rebalance does nothing)
        if self._any_autoreset:
            changing &= ~self._autoreset  # sub-envs whose episode ended restart now and ignore their action
        # Held for `decision_interval` bars (fewer at the episode's end); marked at the last close. A sub-env
        # about to reset stays at its last row: same equity, reward log(1) = 0, then reset below.
        next_row = np.minimum(self._t + self.cfg.decision_interval, self._end)
        if self._can_short:  # a held short is checked at the fill bar's open before the order (SpotTradingEnv.step)
            next_row = self._call_at_open(changing, next_row)
        if changing.any():
            (self._trade_exposure if self.continuous else self._trade)(changing, actions)
        if self._can_short:  # and at every open and close it is held through after that, up to the first breach
            next_row = self._call_while_held(next_row)
        equity = self._cash + self._units * self._closes[next_row]
        ratios = (equity / self._equity).tolist()
        rewards = np.fromiter(map(math.log, ratios), np.float64, self.num_envs) * self.cfg.reward_scale
        self._equity, self._t = equity, next_row
        called = self._margin_call
        if not self.continuous:
            self._action_index = np.where(called, self._flat_index, actions) if called.any() else actions
        truncated = (next_row >= self._end) & ~called
        if self._any_autoreset:
            resetting = self._autoreset
            self._reset_envs(resetting)
            rewards[resetting] = 0.0
            truncated &= ~resetting
        terminated = self._margin_call.copy()  # set by this step's calls only: the previous ones just reset
        self._autoreset = terminated | truncated
        self._any_autoreset = bool(self._autoreset.any())
        return self._observations(), rewards, terminated, truncated, self._infos()

    def _called(self, prices: np.ndarray) -> np.ndarray:
        """`Ledger.margin_call`'s test at `prices` (per sub-env, or per sub-env and row): at or above the held
        short's liquidation price (inf without one), except in sub-envs about to reset."""
        called = prices >= (self._liquidation_price if prices.ndim == 1 else self._liquidation_price[:, None])
        if self._any_autoreset:
            called &= ~(self._autoreset if prices.ndim == 1 else self._autoreset[:, None])
        return called

    def _call_at_open(self, changing: np.ndarray, next_row: np.ndarray) -> np.ndarray:
        """Liquidate the shorts breached at the fill bar's open; their orders are void (`changing` is cleared
        in place) and their step ends at that bar. Returns the step's last row per sub-env."""
        called = self._called(self._opens[self._t + 1])
        if not called.any():
            return next_row
        self._liquidate(called, self._opens[self._t + 1])
        changing &= ~called
        return np.where(called, self._t + 1, next_row)

    def _call_while_held(self, next_row: np.ndarray) -> np.ndarray:
        """Liquidate the shorts breached at a mark they are held through after the fill, in time order: the fill
        bar's close, then each later bar's open and close up to the step's last row (SpotTradingEnv.step). They
        are liquidated at the first such price, and their step ends at its bar. Returns the step's last row per
        sub-env."""
        # The marks' indices, clipped to the step's last close: a repeated last close is the same test again.
        if self._held is None:  # one bar per step: its close
            marks = 2 * next_row[:, None] + 1
        else:
            marks = np.minimum(2 * self._t[:, None] + self._held, 2 * next_row[:, None] + 1)
        breach = self._called(self._marks[marks])
        called = breach.any(axis=1)
        if not called.any():
            return next_row
        first = marks[np.arange(self.num_envs), breach.argmax(axis=1)]  # the first breached mark
        self._liquidate(called, self._marks[first])
        return np.where(called, first // 2, next_row)

    def _liquidate(self, called: np.ndarray, prices: np.ndarray) -> None:
        """`Ledger.margin_call`'s liquidation for the sub-envs in `called`: buy the short back at `prices` with
        slippage and fee, floor cash at EQUITY_FLOOR, go flat. Other sub-envs keep their state (their price
        may be the padding NaN)."""
        bought = -self._units
        price = prices * self._buy_factor
        fee = np.abs(bought) * price * self.fee_rate
        cash = np.maximum(self._cash - (bought * price + fee), EQUITY_FLOOR)
        self._cash = np.where(called, cash, self._cash)
        self._fees_paid = np.where(called, self._fees_paid + fee, self._fees_paid)
        self._trades = self._trades + called
        self._units = np.where(called, 0.0, self._units)
        self._position = np.where(called, 0.0, self._position)
        self._margin_call = self._margin_call | called
        self._liquidation_price = np.where(called, np.inf, self._liquidation_price)

    def _reset_envs(self, mask: np.ndarray) -> None:
        """SpotTradingEnv.reset for the sub-envs in `mask`: a new episode (its own generator's draw), flat, equity 1."""
        indices = np.flatnonzero(mask)
        t, end = self._t.copy(), self._end.copy()
        for i in indices.tolist():
            t[i], end[i] = self._episode_bounds(self._rngs[i])
        self._t, self._end = t, end
        self._action_index = np.where(mask, self._flat_index, self._action_index)
        self._equity, self._cash = np.where(mask, 1.0, self._equity), np.where(mask, 1.0, self._cash)
        self._units, self._position = np.where(mask, 0.0, self._units), np.where(mask, 0.0, self._position)
        self._fees_paid, self._trades = np.where(mask, 0.0, self._fees_paid), np.where(mask, 0, self._trades)
        self._margin_call = self._margin_call & ~mask
        self._liquidation_price = np.where(mask, np.inf, self._liquidation_price)

    def _episode_bounds(self, rng: np.random.Generator) -> tuple[int, int]:
        """SpotTradingEnv._episode_bounds with this sub-env's generator (the same draw)."""
        last_row = self._hi - 1
        length = self.cfg.episode_length
        if length is None or self.cfg.split != "train" or last_row - self._lo <= length:
            return self._lo, last_row
        start = int(rng.integers(self._lo, last_row - length + 1))
        return start, start + length

    def _trade(self, changing: np.ndarray, actions: np.ndarray) -> None:
        """`Ledger.rebalance` at the next bar's open for the sub-envs in `changing`: close the held position,
        then open the new target with the cash left after fees, with the ledger's operations in its order.

        It runs over all sub-envs: the others sell 0 units and buy 0 units, and a zero-unit fill is exactly a
        no-op in IEEE arithmetic (fee 0, cash - 0.0 == cash), so no subset gather/scatter is needed."""
        opens = self._opens[self._t + 1]
        cash, fees_paid = self._cash, self._fees_paid
        held = np.where(changing, self._units, 0.0)  # closed by a fill of -held units (none when held is 0)
        sold = -held
        price = opens * self._close_factor[self._action_index]
        fee = np.abs(sold) * price * self.fee_rate
        cash = cash - (sold * price + fee)
        fees_paid = fees_paid + fee
        target = np.where(changing, self.targets[actions], 0.0)  # opened (none when the target is flat)
        price = opens * self._open_factor[actions]
        bought = np.copysign(np.abs(target) * cash / (1.0 + self.fee_rate) / price, target)
        fee = np.abs(bought) * price * self.fee_rate
        self._cash = cash - (bought * price + fee)
        self._fees_paid = fees_paid + fee
        self._trades = self._trades + (held != 0.0) + (target != 0.0)  # one trade per fill
        self._units = np.where(changing, bought, self._units)  # 0.0 + bought, as the ledger adds to a flat position
        self._position = np.where(changing, self.targets[actions], self._position)
        self._set_liquidation_prices()

    def _set_liquidation_prices(self) -> None:
        """Ledger's liquidation_price after a fill, computed only where a short is held (never in long-only sets)."""
        if self._can_short:
            self._liquidation_price = np.divide(self._cash, -self._units * (1.0 + self.maintenance_margin),
                                                out=np.full(self.num_envs, np.inf), where=self._units < 0.0)

    def _exposure_targets(self, actions: np.ndarray) -> np.ndarray:
        """Continuous actions (num_envs, 1) as target exposures: float64 (a copy), clipped into the bounds, -0.0 made
        0.0, as `envs.trading.positions.exposure_target` makes each; NaN refused in one line, as there."""
        targets = np.array(actions, dtype=np.float64).reshape(self.num_envs)
        if np.isnan(targets).any():
            raise InputError(f"trading env: continuous actions must be numbers in [{self.bounds[0]:g}, "
                             f"{self.bounds[1]:g}], got NaN for sub-env(s) {np.flatnonzero(np.isnan(targets)).tolist()}")
        return np.clip(targets, *self.bounds) + 0.0

    def _trade_exposure(self, changing: np.ndarray, targets: np.ndarray) -> None:
        """`Ledger.rebalance` to continuous target exposures at the next bar's open, for the sub-envs in `changing`,
        with the ledger's operations in its order. A target on the held side (`resize`) is one fill of the difference
        to the target's units, sized on the equity at the open; any other change (`reopen`) closes the held units and
        opens the target with the cash left. As in `_trade`, every sub-env runs through both fills, those without
        one with zero units (an exact no-op)."""
        opens = self._opens[self._t + 1]
        units, up, down = self._units, self._buy_factor, 1.0 - self.slippage_rate
        resize = changing & (targets * self._position > 0.0)
        reopen = changing & ~resize
        goal = self._units_for(targets, self._cash + units * opens, opens)
        moved = np.where(resize, goal - units, np.where(reopen, -units, 0.0))  # the first fill: resize or close
        price = opens * np.where(moved > 0, up, down)
        fee = np.abs(moved) * price * self.fee_rate
        cash, fees_paid = self._cash - (moved * price + fee), self._fees_paid + fee
        opened = np.where(reopen, targets, 0.0)  # the second fill: open from flat (none when the target is flat)
        price = opens * np.where(opened > 0, up, down)
        bought = self._units_for(opened, cash, opens)
        fee = np.abs(bought) * price * self.fee_rate
        self._cash, self._fees_paid = cash - (bought * price + fee), fees_paid + fee
        self._trades = self._trades + (moved != 0.0) + (opened != 0.0)  # one trade per fill
        self._units = np.where(reopen, bought, np.where(resize, units + moved, units))
        self._position = np.where(changing, targets, self._position)
        self._set_liquidation_prices()

    def _units_for(self, targets: np.ndarray, equity: np.ndarray, opens: np.ndarray) -> np.ndarray:
        """`Ledger._target_units` per sub-env: `targets` of `equity` at the open moved by the slippage, fee set aside."""
        side_price = opens * np.where(targets > 0, self._buy_factor, 1.0 - self.slippage_rate)
        return np.copysign(np.abs(targets) * equity / (1.0 + self.fee_rate) / side_price, targets)

    def _observations(self) -> np.ndarray:
        """The feature window of rows t - window + 1 .. t and the position one-hot (or the held exposure), per
        sub-env (a new array)."""
        windows = self._windows[self._t - (self.cfg.window - 1)]
        held = self._position[:, None].astype(np.float32) if self.continuous else self._position_eye[self._action_index]
        return np.concatenate((windows, held), axis=1)

    def _infos(self) -> dict[str, np.ndarray]:
        """The single env's info in gymnasium's vector layout: one array per key and a `_key` mask. The state
        arrays are copied: a caller may write to what it gets, as to SyncVectorEnv's arrays."""
        values = (self._equity, self._position, self._fees_paid, self._trades, self._t, self._margin_call)
        infos: dict[str, np.ndarray] = {}
        for key, value in zip(INFO_KEYS, values):
            infos[key] = value.copy()
            infos[f"_{key}"] = self._every
        return infos
