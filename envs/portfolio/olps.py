"""The OLPS algorithms of universal-portfolios 0.4.17, as weights and final wealths the portfolio book can check.

The library is installed by `scripts/setup.sh portfolio` (it declares pandas<3, so not as a pip extra) and imported
only inside these functions: importing it takes about 4 s and only scoring the OLMAR and PAMR baselines
(envs/portfolio/baselines.py) and the accounting check (tests/unit/test_portfolio_accounting.py,
experiments/studies/portfolio_accounting.py) need it.

Its timing, read from universal/algo.py and result.py: `algo.run(prices)` turns the prices into relatives
x_t = p_t / p_{t-1} and row t of `result.B` is what the portfolio holds over x_t, decided from x_0 .. x_{t-1}. Row 0
earns nothing (there is no x_0), so the final wealth is prod_{t>=1} (B_t . x_t), less the fees. The book decides at
close t and holds over x_{t+1}, so its target at close t is the library's row t+1.

Under pandas 3 the library's first-ratio fix-up (universal/algo.py:249, `X[name].iloc[...] = 1.0`) is a chained
assignment that copy-on-write drops, with a ChainedAssignmentError warning. On a NaN-free frame it touches only x_0,
which no wealth uses, and docs/portfolio.md measures the four algorithms here against pandas 2.3.3; where an asset
starts later (leading NaN) its listing-day relative would stay NaN, so frames with NaN are refused.
"""
from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from envs.errors import InputError

# What `import universal.algos` imports beyond the platform's own dependencies (scripts/setup.sh pins them).
MODULES = ("universal", "cvxopt", "statsmodels", "seaborn", "plotly", "six")
ALGORITHMS = ("ucrp", "bah", "olmar", "pamr")
WEIGHT_ALGORITHMS = ("olmar", "pamr")


def library_available() -> str | None:
    """None when universal-portfolios and what it imports are installed, else the one-line fix (found without
    importing it, so a test can skip cheaply)."""
    for module in MODULES:
        if importlib.util.find_spec(module) is None:
            missing = "" if module == "universal" else f" (it needs {module})"
            return f"universal-portfolios is not installed{missing}: run scripts/setup.sh portfolio"
    return None


def bundled_prices(name: str) -> pd.DataFrame:
    """A benchmark set from the library's wheel (`nyse_o`, `nyse_n`, `tse`, `sp500`, `msci`, `djia`): each row is the
    cumulated daily price relatives, so the first row is the first day's relative and not 1; no dates, anonymous
    assets."""
    fix = library_available()
    if fix is not None:
        raise InputError(fix)
    from universal import tools

    return tools.dataset(name)


@dataclass(frozen=True)
class OlpsRun:
    """One run of a library algorithm: its weights (T, N; row t held over x_t, row 0 over nothing) and its final
    wealth at each fee asked for."""

    weights: np.ndarray
    wealths: tuple[float, ...]


def olps_run(algorithm: str, closes: pd.DataFrame, fees: Sequence[float] = (0.0,)) -> OlpsRun:
    """Run "ucrp", "bah", "olmar" or "pamr" (the library's default parameters) on the NaN-free prices `closes`
    (T, N). Each fee is the library's `result.fee`: fee * sum_i |B_t,i - drifted B_t-1,i| comes off period t's
    return and the first purchase pays none. One run serves every fee (OLMAR takes 20 to 30 s on NYSE(O) here)."""
    if algorithm not in ALGORITHMS:
        raise InputError(f"OLPS algorithm {algorithm!r} is not one of {', '.join(ALGORITHMS)}")
    if closes.isna().to_numpy().any():
        raise InputError(f"the price frame holds NaN in {', '.join(map(str, closes.columns[closes.isna().any()]))}: "
                         "universal-portfolios under pandas 3 drops its listing-day fix-up; give assets that trade "
                         "on every row")
    fix = library_available()
    if fix is not None:
        raise InputError(fix)
    from universal import algos

    make = {"ucrp": algos.CRP, "bah": algos.BAH, "olmar": algos.OLMAR, "pamr": algos.PAMR}[algorithm]
    with warnings.catch_warnings():
        # The dropped fix-up of x_0 (see the module docstring) and PAMR's first step, where x_0 (all ones after its
        # fillna) makes lambda 0.5 / 0, which the library caps at 1e5 times a zero vector: both harmless here.
        warnings.simplefilter("ignore", pd.errors.ChainedAssignmentError)
        warnings.filterwarnings("ignore", "divide by zero", RuntimeWarning, r"universal\.algos\.pamr")
        result = make().run(closes, log_progress=False)
    wealths = []
    for fee in fees:
        result.fee = fee
        wealths.append(float(result.total_wealth))
    # UCRP's weights carry an extra CASH column of zeros; the assets are the frame's.
    return OlpsRun(result.B[closes.columns].to_numpy(dtype=np.float64), tuple(wealths))


def olps_weights(algorithm: str, closes: pd.DataFrame) -> np.ndarray:
    """The library's weights (T, N) of "olmar" or "pamr" on the NaN-free prices `closes` (T, N): row t is held over
    x_t = p_t / p_{t-1} (row 0 over nothing), so the book's target at close t is row t+1."""
    if algorithm not in WEIGHT_ALGORITHMS:
        raise InputError(f"OLPS weights: {algorithm!r} is not one of {', '.join(WEIGHT_ALGORITHMS)}")
    return olps_run(algorithm, closes).weights
