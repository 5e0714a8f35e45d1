"""`trading/Portfolio-v0`: one policy allocates across a universe of assets (docs/portfolio.md).

universe (the assets' bars on one calendar), market (one fold: features per asset, what can trade), weights (scores
to weights), book (the exact self-financing rebalance), env, baselines (UCRP, UBAH, momentum, OLPS, minimum
variance, flat), backtest (the scorer), olps and risk (the libraries, imported only when scoring).
"""
