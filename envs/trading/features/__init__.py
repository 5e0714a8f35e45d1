"""Features of a trading env, declared in the experiment file and computed by one causal path.

`environment.env_config.features` lists feature sets, transforms, TA-Lib functions and blocks (higher
timeframes, other markets, outside series): `spec` reads the list, `matrix` computes it causally and
normalizes it per fold (TA-Lib functions over fixed look-backs, `talib_functions`, without a call per bar where
`fast_path` gives the same bits), `store` caches it by content under the run's storage root. The default is the set
`basic`, the eight features of every earlier round, bit for bit.
"""
from envs.trading.features.matrix import FeatureSet, RawFeatures, normalize
from envs.trading.features.spec import Item, parse_features
from envs.trading.features.store import market_features
from envs.trading.features.transforms import SETS

DEFAULT_FEATURES = ("basic",)

__all__ = ["DEFAULT_FEATURES", "FeatureSet", "Item", "RawFeatures", "SETS", "market_features", "normalize",
           "parse_features"]
