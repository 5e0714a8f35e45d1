"""`trading/Spot-v0` as a native vector env: N sub-envs stepped by numpy in one call.

A Python `gym.Env.step` costs a few microseconds however little it computes (method calls, the info
dict, a fresh observation), and gymnasium's SyncVectorEnv adds its own loop and info merging on top.
Here the N sub-envs are columns of arrays: one market loaded once, the ledger's fill arithmetic
vectorized, observations gathered with one fancy index. Results are those of N `SpotTradingEnv`s in a
`SyncVectorEnv` with next-step autoreset, bit for bit (`tests/unit/test_trading_vector_env.py`):
the same seeds (sub-env i is seeded with seed + i), the same episode starts, the same fills at the
next bar's open with slippage and fees, the same margin calls (per sub-env terminations), the same
observations, rewards and infos, for discrete position sets and continuous exposures alike
(`tests/unit/test_continuous_positions.py`), and with `min_hold` (`tests/unit/test_min_hold.py`: the same
`envs.trading.positions.hold_rule` on arrays). The reward's log is
`math.log` per sub-env, because numpy's vectorized log (SIMD) differs from it in the last bit for ~4%
of inputs; the single env keeps its fast `math.log` on a Python float.

A step costs a fixed ~10-15 µs of numpy calls plus well under a µs per sub-env, so the more sub-envs per
call, the cheaper an env step. That fixed cost is a count of numpy calls on tiny arrays (each ~0.3-1 µs whatever
its size), so the step is written to make few: a discrete order is one transition code (held index, asked index)
whose fill coefficients are table lookups, not `np.where`s on signs and masks; scalars are preallocated arrays
(a ufunc resolves a Python float operand each call); `np.count_nonzero` tests masks (`ndarray.any` goes through
Python); the observation is one gather of a strided view of window + position width, its position columns then
overwritten, instead of a gather, a one-hot gather and a concatenate. RLlib's env runners get this env through
`gym_env_vectorize_mode="vector_entry_point"` (algos/rllib/config.py).
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
from envs.trading.positions import EXPOSURE_BOUNDS, POSITION_SETS, can_short, hold_rule, is_continuous


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
        # a set's targets by action index (none if continuous)
        self.targets = np.array(POSITION_SETS.get(positions, ()))
        n_features = self.market.features.shape[1]
        self.single_action_space = action_space(positions)
        self.single_observation_space = gym.spaces.Box(
            -10.0, 10.0, shape=(self.cfg.window * n_features + position_width(positions),), dtype=np.float32)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self._lo, self._hi = self.market.bounds[self.cfg.split]
        # Row t of `_obs_rows` is the observation of decision row t with its last `width` values wrong (a strided
        # view, no copy): the flat run of feature rows t - window + 1 .. t, then the next row's first values (or
        # zero padding) where the position goes. So all sub-envs' observations are one fancy index into a new
        # array, whose position columns are then written. The zeros in front make t itself the row's index.
        width = position_width(positions)
        features = np.ascontiguousarray(self.market.features, dtype=np.float32).reshape(-1)
        padded = np.concatenate((np.zeros((self.cfg.window - 1) * n_features, np.float32), features,
                                 np.zeros(width, np.float32)))
        self._window_size = self.cfg.window * n_features
        self._obs_rows = sliding_window_view(padded, self._window_size + width)[::n_features]
        self._position_eye = np.eye(len(self.targets), dtype=np.float32)
        self._flat_index = int(np.flatnonzero(self.targets == 0.0)[0]) if len(self.targets) else 0
        # `_next_opens[t]` is the open a decision at row t fills at. One padding bar: step() gathers it for every
        # sub-env, also one about to reset at the data's last row (its fill is masked out; only reachable if
        # sub-envs were out of step on a held-out split).
        self._next_opens = np.append(self.market.opens[1:].astype(np.float64), np.nan)
        self._closes = self.market.closes.astype(np.float64)
        self.fee_rate = self.cfg.fee_bps / 1e4
        self.slippage_rate = self.cfg.slippage_bps / 1e4
        self.maintenance_margin = self.cfg.maintenance_margin
        self._min_trade, self._reward_scale = self.cfg.min_trade, self.cfg.reward_scale
        # Scalar operands as arrays: the same IEEE operations, without a ufunc's per-call conversion of a Python float.
        self._fee_rates = np.full(num_envs, self.fee_rate)
        self._fee_divisors = np.full(num_envs, 1.0 + self.fee_rate)
        self._reward_scales = np.full(num_envs, self._reward_scale)
        self._intervals = np.full(num_envs, self.cfg.decision_interval, dtype=np.int64)
        self._min_hold = self.cfg.hold_decisions
        up, down = 1.0 + self.slippage_rate, 1.0 - self.slippage_rate  # Ledger's buy and sell price factors
        self._buy_factor = up  # a margin call buys the short back
        # Every bar's open and close in time order (open 0, close 0, open 1, ...): the marks of a short held from the
        # fill of a decision at row t are the run 2t + 3 (bar t+1's close, after the fill at its open) .. 2t + 2k + 1
        # (bar t+k's close), k = decision_interval; `_held` are those offsets from 2t (None for k = 1: the close 2t + 3
        # of the step's only bar).
        self._marks = np.stack((self.market.opens, self.market.closes), axis=1).astype(np.float64).reshape(-1)
        self._interval = interval = self.cfg.decision_interval
        self._held = np.arange(3, 2 * interval + 2) if interval > 1 else None
        self._can_short = can_short(positions)  # long_flat and continuous never borrow: no margin checks at all
        if not self.continuous:
            self._set_fill_tables(up, down)
        self._rngs: list[np.random.Generator | None] = [None] * num_envs
        shape = (num_envs,)
        self._t, self._end = np.zeros(shape, dtype=np.int64), np.zeros(shape, dtype=np.int64)
        self._action_index = np.full(shape, self._flat_index, dtype=np.int64)
        # min_hold's record of each sub-env's last decision (SpotTradingEnv._hold): asked and applied index, and the
        # held position's age in decisions (a reset's flat start is as old as min_hold)
        self._asked_actions, self._applied_actions = self._action_index.copy(), self._action_index.copy()
        self._held_for = np.full(shape, self._min_hold, dtype=np.int64)
        self._equity, self._cash, self._units = np.ones(shape), np.ones(shape), np.zeros(shape)
        # The held target: read by continuous positions only; a discrete one is `targets[_action_index]`.
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

    def _set_fill_tables(self, up: float, down: float) -> None:
        """Lookup tables by transition code `held index * n + asked index` (`_codes`), plus one code for no order:
        what a discrete order's fill needs, so that it is gathered instead of computed from signs and masks.
        Closing a short buys, closing a long sells; opening a long buys, opening a short sells."""
        targets = self.targets
        n = len(targets)
        self._codes = np.arange(n * n).reshape(n, n)  # [held, asked]: an asked index out of range is an IndexError
        self._no_order = n * n  # a voided order: the sub-env is about to reset, or its short was called at the open
        held = np.append(np.repeat(np.arange(n), n), 0)  # by code; the no-order code's entries are no fill
        asked = np.append(np.tile(np.arange(n), n), 0)
        self._changes = change = (held != asked) & (np.arange(n * n + 1) != self._no_order)
        # The close's price factor, negated (0 without a close): units x (open x this) is the ledger's
        # (-units) x (open x factor) bit for bit, as rounding is symmetric in sign, and ±0 where nothing is closed.
        self._close_factor = np.where(change, -1.0, 0.0) * np.where(targets[held] < 0, up, down)
        self._open_factor = np.where(targets[asked] > 0, up, down)
        self._open_target = np.where(change, targets[asked], 0.0)
        self._open_size = np.abs(self._open_target)
        # One trade per fill: a close where a position is held, and an open where the target is not flat. (The
        # ledger counts a close where units != 0: held units are 0 exactly when their target is, as a whole
        # target's units are 0 only if the cash they were bought with is 0, a difference of numbers near 1 that
        # cannot underflow, and then the log reward of equity 0 raises first.)
        self._fills = (change & (targets[held] != 0.0)).astype(np.int64) + (self._open_target != 0.0)
        # The index held after the order: no order is voided by a reset (to flat) or by a call at the open (flat).
        self._asked = np.append(asked[:-1], self._flat_index)

    def step(self, actions: np.ndarray):
        if self.continuous:
            actions = self._exposure_targets(actions)
            # Ledger.rebalance's test: the target differs from the held one by min_trade or more
            orders = (actions != self._position) & (np.abs(actions - self._position) >= self._min_trade)
        else:
            actions = np.asarray(actions, dtype=np.int64).reshape(self.num_envs)  # maybe the caller's buffer
            if self._min_hold > 1:
                actions = self._hold(actions)
            orders = self._codes[self._action_index, actions]  # the same code for the same index: no order
        if self._any_autoreset:
            self._void(orders, self._autoreset)  # sub-envs whose episode ended restart now and ignore their action
        # Held for `decision_interval` bars (fewer at the episode's end); marked at the last close. A sub-env
        # about to reset stays at its last row: same equity, reward log(1) = 0, then reset below.
        next_row = self._t + self._intervals
        if self._any_autoreset or self._interval > 1:  # else every sub-env has t < end: it would have reset
            next_row = np.minimum(next_row, self._end)
        if self._can_short:  # a held short is checked at the fill bar's open before the order (SpotTradingEnv.step)
            next_row = self._call_at_open(orders, next_row)
        if self.continuous:
            if np.count_nonzero(orders):
                self._trade_exposure(orders, actions)
        else:
            changing = self._changes[orders]
            if np.count_nonzero(changing):
                self._trade(orders, changing)
        closes = self._closes[next_row]
        if self._can_short:  # and at every open and close it is held through after that, up to the first breach
            next_row, closes = self._call_while_held(next_row, closes)
        equity = self._cash + self._units * closes
        ratios = (equity / self._equity).tolist()
        rewards = np.fromiter(map(math.log, ratios), np.float64, self.num_envs) * self._reward_scales
        self._equity, self._t = equity, next_row
        truncated = next_row >= self._end
        if not self.continuous:
            self._action_index = self._asked[orders]  # a new array: `actions` may be the caller's buffer
        if self._can_short and np.count_nonzero(called := self._margin_call):
            if not self.continuous:
                self._action_index = np.where(called, self._flat_index, self._action_index)
            truncated &= ~called
        if self._any_autoreset:
            resetting = self._autoreset
            self._reset_envs(resetting)
            rewards[resetting] = 0.0
            truncated &= ~resetting
        terminated = self._margin_call.copy()  # set by this step's calls only: the previous ones just reset
        self._autoreset = terminated | truncated
        self._any_autoreset = np.count_nonzero(self._autoreset) > 0
        return self._observations(), rewards, terminated, truncated, self._infos()

    def _hold(self, asked: np.ndarray) -> np.ndarray:
        """min_hold's rule on every sub-env's decision: the indices applied (a new array; `asked` is copied, as it
        may be the caller's buffer). Sub-envs about to reset get theirs back in `_reset_envs`."""
        applied, self._held_for = hold_rule(asked, self._action_index, self._held_for, self._min_hold)
        self._asked_actions, self._applied_actions = asked.copy(), applied
        return applied

    def _void(self, orders: np.ndarray, mask: np.ndarray) -> None:
        """Cancel the orders of the sub-envs in `mask`, in place: a continuous order's flag cleared, a discrete
        order's code set to no order."""
        if self.continuous:
            orders &= ~mask
        else:
            orders[mask] = self._no_order

    def _called(self, prices: np.ndarray) -> np.ndarray:
        """`Ledger.margin_call`'s test at `prices` (per sub-env, or per sub-env and row): at or above the held
        short's liquidation price (inf without one), except in sub-envs about to reset."""
        called = prices >= (self._liquidation_price if prices.ndim == 1 else self._liquidation_price[:, None])
        if self._any_autoreset:
            called &= ~(self._autoreset if prices.ndim == 1 else self._autoreset[:, None])
        return called

    def _call_at_open(self, orders: np.ndarray, next_row: np.ndarray) -> np.ndarray:
        """Liquidate the shorts breached at the fill bar's open; their orders are void (`orders` is changed in
        place, `_void`) and their step ends at that bar. Returns the step's last row per sub-env."""
        opens = self._next_opens[self._t]
        called = self._called(opens)
        if not np.count_nonzero(called):
            return next_row
        self._liquidate(called, opens)
        self._void(orders, called)
        return np.where(called, self._t + 1, next_row)

    def _call_while_held(self, next_row: np.ndarray, closes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Liquidate the shorts breached at a mark they are held through after the fill, in time order: the fill
        bar's close, then each later bar's open and close up to the step's last row (SpotTradingEnv.step). They
        are liquidated at the first such price, and their step ends at its bar. Returns the step's last row per
        sub-env and its close (`closes` is the close of `next_row`)."""
        if self._held is None:  # one bar per step: its close is the only mark
            called = self._called(closes)
            if np.count_nonzero(called):
                self._liquidate(called, closes)
            return next_row, closes
        # The marks' indices, clipped to the step's last close: a repeated last close is the same test again.
        marks = np.minimum(2 * self._t[:, None] + self._held, 2 * next_row[:, None] + 1)
        breach = self._called(self._marks[marks])
        called = breach.any(axis=1)
        if not np.count_nonzero(called):
            return next_row, closes
        first = marks[np.arange(self.num_envs), breach.argmax(axis=1)]  # the first breached mark
        self._liquidate(called, self._marks[first])
        next_row = np.where(called, first // 2, next_row)
        return next_row, self._closes[next_row]

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
        if self._min_hold > 1:
            self._asked_actions = np.where(mask, self._flat_index, self._asked_actions)
            self._applied_actions = np.where(mask, self._flat_index, self._applied_actions)
            self._held_for = np.where(mask, self._min_hold, self._held_for)

    def _episode_bounds(self, rng: np.random.Generator) -> tuple[int, int]:
        """SpotTradingEnv._episode_bounds with this sub-env's generator (the same draw)."""
        last_row = self._hi - 1
        length = self.cfg.episode_length
        if length is None or self.cfg.split != "train" or last_row - self._lo <= length:
            return self._lo, last_row
        start = int(rng.integers(self._lo, last_row - length + 1))
        return start, start + length

    def _trade(self, codes: np.ndarray, changing: np.ndarray) -> None:
        """`Ledger.rebalance` at the next bar's open for the sub-envs whose transition `codes` change the target
        (`changing`): close the held position, then open the new target with the cash left after fees, with the
        ledger's operations in its order. The position itself is the asked index's target (`_infos`).

        It runs over all sub-envs: the others sell ±0 units and buy 0 units, and a zero-unit fill is exactly a
        no-op in IEEE arithmetic (fee 0, cash - ±0.0 == cash), so no subset gather/scatter is needed."""
        opens = self._next_opens[self._t]
        notional = self._units * (opens * self._close_factor[codes])  # the units sold x their price
        fee = np.abs(notional) * self._fee_rates  # |sold| x price: the same bits, as the price is positive
        cash = self._cash - (notional + fee)
        fees_paid = self._fees_paid + fee
        price = opens * self._open_factor[codes]  # the target opened: none when it is flat or not changing
        bought = np.copysign(self._open_size[codes] * cash / self._fee_divisors / price, self._open_target[codes])
        notional = bought * price
        fee = np.abs(notional) * self._fee_rates
        self._cash = cash - (notional + fee)
        self._fees_paid = fees_paid + fee
        self._trades = self._trades + self._fills[codes]
        np.copyto(self._units, bought, where=changing)  # 0.0 + bought, as the ledger adds to a flat position
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
                             f"{self.bounds[1]:g}], got NaN for sub-env(s) "
                             f"{np.flatnonzero(np.isnan(targets)).tolist()}")
        return np.clip(targets, *self.bounds) + 0.0

    def _trade_exposure(self, changing: np.ndarray, targets: np.ndarray) -> None:
        """`Ledger.rebalance` to continuous target exposures at the next bar's open, for the sub-envs in `changing`,
        with the ledger's operations in its order. A target on the held side (`resize`) is one fill of the difference
        to the target's units, sized on the equity at the open; any other change (`reopen`) closes the held units and
        opens the target with the cash left. As in `_trade`, every sub-env runs through both fills, those without
        one with zero units (an exact no-op)."""
        opens = self._next_opens[self._t]
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
        """`Ledger._target_units` per sub-env: `targets` of `equity` at the open moved by the slippage, fee set
        aside."""
        side_price = opens * np.where(targets > 0, self._buy_factor, 1.0 - self.slippage_rate)
        return np.copysign(np.abs(targets) * equity / (1.0 + self.fee_rate) / side_price, targets)

    def _observations(self) -> np.ndarray:
        """The feature window of rows t - window + 1 .. t and the position one-hot (or the held exposure), per
        sub-env: a new array, the caller's to keep (the single env returns a new one every step)."""
        observations = self._obs_rows[self._t]
        if self.continuous:
            observations[:, self._window_size] = self._position  # float32, as the single env's
        else:
            observations[:, self._window_size:] = self._position_eye.take(self._action_index, axis=0)
        return observations

    def _infos(self) -> dict[str, np.ndarray]:
        """The single env's info in gymnasium's vector layout: one array per key and a `_key` mask. The state
        arrays are copied: a caller may write to what it gets, as to SyncVectorEnv's arrays. A discrete position
        is the held index's target: the same number `_position` would hold, gathered new."""
        every = self._every
        position = self._position.copy() if self.continuous else self.targets[self._action_index]
        infos = {"equity": self._equity.copy(), "_equity": every, "position": position, "_position": every,
                 "fees_paid": self._fees_paid.copy(), "_fees_paid": every, "trades": self._trades.copy(),
                 "_trades": every, "row": self._t.copy(), "_row": every, "margin_call": self._margin_call.copy(),
                 "_margin_call": every}
        if self._min_hold > 1:
            infos.update(asked_action=self._asked_actions.copy(), _asked_action=every,
                         applied_action=self._applied_actions.copy(), _applied_action=every,
                         held_for=self._held_for.copy(), _held_for=every)
        return infos
