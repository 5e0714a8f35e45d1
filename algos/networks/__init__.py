"""The networks the platform defines itself (RLlib's default modules aside): the portfolio model for a universe of
assets, as `training` keys (`portfolio_model`, no torch), as torch RLModules (`portfolio_module`) and on the numpy
side (`portfolio_numpy`: its export and its forward pass for serving)."""
