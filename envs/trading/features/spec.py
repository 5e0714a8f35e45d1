"""The feature list of an experiment file, read into objects: sets, transforms, TA-Lib functions and blocks.

`environment.env_config.features` is a list. Each item is one of:

- the name of a set (`basic`) or of a transform with its defaults (`log_return`);
- `{transform: trend, window: 48}`: a transform with its parameters (`transforms.TRANSFORMS`);
- `{ta: MACD, fastperiod: 12, outputs: [macdhist]}`: any allowed TA-Lib function by its own name and
  parameter names, all its outputs unless `outputs:` names some;
- `{resample: 4h, features: [...]}`: features of bars resampled from the base bars; a higher bar is seen
  from the first base bar that opens after it closed;
- `{asset: ETH-USD_1h.parquet, features: [...], missing: ffill, before_start: wait}`: another market's bars
  of the same timeframe, aligned by timestamp as of bar t;
- `{series: funding.csv, column: rate, lag: 8h, features: [...]}`: an outside series, seen from the first
  base bar that opens after its value was published (its timestamp plus `lag`).

A `transform:` or `ta:` item may add `cross_section: rank` or `cross_section: zscore`: its value is then ranked or
z-scored across a universe's assets at each bar (`trading/Portfolio-v0`, envs.portfolio.inputs), not z-scored
over the asset's own train rows. Each asset's own value is computed as without the key (the feature store keeps one
matrix for both); a family that trades one asset refuses the key (`cross_section_refusal`), and so does an
`asset:` or `series:` block, whose values are the same for every asset of a universe.

Parsing checks names, parameters and outputs (with "did you mean") and needs no data; what needs the data
(another market's timeframe and range, a series' timestamps, warm-ups against a fold) is checked when the
features are computed (`envs.trading.features.matrix`), which a dry run does too.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Union

import pandas as pd

from envs.errors import InputError
from envs.trading.data import TIMEFRAMES
from envs.trading.features.talib_functions import TaFeature, input_columns
from envs.trading.features.transforms import INPUTS, SETS, TRANSFORMS
from envs.validation import did_you_mean

MISSING_POLICIES = ("ffill", "zero", "error")   # another market's or a series' absent bars
BEFORE_START = ("wait", "zero")                  # rows before its history: decisions wait for it, or see 0
NAN_POLICIES = ("error", "drop", "ffill")        # NaN values in an outside series
SERIES_FEATURES = ("value", "change", "log_return", "trend", "volatility", "zscore")  # what a one-value series allows
CROSS_SECTIONS = ("rank", "zscore")              # across a universe's assets at each bar (module docstring)
CROSS_SECTION_KEY = "cross_section"


@dataclass(frozen=True)
class TransformFeature:
    name: str
    params: tuple[tuple[str, Any], ...]
    cross_section: str | None = None  # rank | zscore across a universe's assets (module docstring)

    @property
    def label(self) -> str:
        return TRANSFORMS[self.name].column(self.name, dict(self.params))

    @property
    def first_valid(self) -> int:
        return TRANSFORMS[self.name].first_valid(**dict(self.params))


@dataclass(frozen=True)
class Block:
    """Features computed on other bars (resampled, another market's, an outside series) and aligned to the base bars."""

    kind: str                      # resample | asset | series
    source: str                    # the timeframe (resample) or the file (asset, series)
    children: tuple["Item", ...]
    options: tuple[tuple[str, Any], ...] = field(default=())

    def option(self, key: str, default: Any = None) -> Any:
        return dict(self.options).get(key, default)

    @property
    def label(self) -> str:
        """The prefix of its columns: the timeframe, or the asset's or series' name."""
        if self.kind == "resample":
            return self.source
        return self.option("name") or Path(self.source.split("?")[0]).stem


@dataclass(frozen=True)
class CrossSectionalTa(TaFeature):
    """A TA-Lib feature with `cross_section:`: every path that computes a TaFeature computes it unchanged (and the
    feature store names it by the TaFeature's own fields); only a universe's market reads `cross_section`."""

    cross_section: str | None = None


Item = Union[TransformFeature, TaFeature, Block]
_BLOCK_KEYS = {
    "resample": {"features"},
    "asset": {"features", "name", "missing", "before_start"},
    "series": {"features", "name", "column", "lag", "nan", "missing", "before_start"},
}


def parse_features(items: Any, where: str = "", in_series: bool = False) -> tuple[Item, ...]:
    """The feature list as objects (sets expanded), or an InputError naming the item (`where[i]`) and the fix."""
    if not isinstance(items, list) or not items:
        raise InputError(f"{where}: a non-empty list of feature sets or features, e.g. [basic, {{ta: RSI}}]")
    parsed: list[Item] = []
    for index, item in enumerate(items):
        at = f"{where}[{index}]"
        if isinstance(item, str):
            parsed += _named(item, at, in_series)
        elif isinstance(item, dict):
            parsed.append(_mapping(item, at, in_series))
        else:
            raise InputError(f"{at}: write a set or transform name (e.g. basic) or a mapping (e.g. {{ta: RSI}})")
    return tuple(parsed)


def _named(name: str, at: str, in_series: bool) -> list[Item]:
    if name in SETS and not in_series:
        return list(parse_features(SETS[name], f"{at} ({name})"))
    if name in TRANSFORMS:
        return [_transform({"transform": name}, at, in_series)]
    known = [*([] if in_series else SETS), *(SERIES_FEATURES if in_series else TRANSFORMS)]
    raise InputError(f"{at}: {name!r} is neither a feature set nor a transform{did_you_mean(name, known)} "
                     f"(sets: {', '.join(SETS)}; transforms: {', '.join(TRANSFORMS)}; or {{ta: NAME}} for TA-Lib)")


def _mapping(item: dict[str, Any], at: str, in_series: bool) -> Item:
    kinds = [key for key in ("transform", "ta", *_BLOCK_KEYS) if key in item]
    if len(kinds) != 1:
        hint = did_you_mean(next(iter(item), ""), ["transform", "ta", *_BLOCK_KEYS])
        raise InputError(f"{at}: a feature mapping has exactly one of transform:, ta:, resample:, asset:, series:"
                         f"{hint} (got {', '.join(map(str, item)) or 'nothing'})")
    kind = kinds[0]
    if kind in ("transform", "ta"):
        mode = _cross_section(item, at, in_series)
        item = {key: value for key, value in item.items() if key != CROSS_SECTION_KEY}
    if kind == "transform":
        return replace(_transform(item, at, in_series), cross_section=mode)
    if kind == "ta":
        feature = _ta(item, at)
        if in_series and any(c != "close" for c in input_columns(feature.name)):
            raise InputError(f"{at}: ta: {feature.name} reads {', '.join(input_columns(feature.name))}; an outside "
                             "series has one value: use a function of one price (e.g. RSI, EMA, ROC)")
        if mode is None:
            return feature
        return CrossSectionalTa(**{f.name: getattr(feature, f.name) for f in fields(feature)},
                                cross_section=mode)
    if in_series:
        raise InputError(f"{at}: {kind}: blocks cannot be nested inside a series block")
    return _block(kind, item, at)


def _cross_section(item: dict[str, Any], at: str, in_series: bool) -> str | None:
    """The item's `cross_section:` (None without one), or an InputError naming the item."""
    if CROSS_SECTION_KEY not in item:
        return None
    mode = item[CROSS_SECTION_KEY]
    if mode not in CROSS_SECTIONS:
        raise InputError(f"{at}: cross_section: {mode!r} is not a cross-sectional transform"
                         f"{did_you_mean(str(mode), CROSS_SECTIONS)} (known: {', '.join(CROSS_SECTIONS)})")
    if in_series:
        raise InputError(f"{at}: cross_section: an outside series has the same value for every asset, so ranking "
                         "it across assets says nothing: drop cross_section here")
    return mode


def _ta(item: dict[str, Any], at: str) -> TaFeature:
    feature = TaFeature.parse(item, at)
    try:
        _ = feature.first_valid  # measures its unstable period: a period too long to converge is refused here
    except InputError as error:
        raise InputError(f"{at}: {error}") from None
    return feature


def _transform(item: dict[str, Any], at: str, in_series: bool) -> TransformFeature:
    name = item["transform"]
    known = SERIES_FEATURES if in_series else tuple(TRANSFORMS)
    if name not in known:
        extra = " (an outside series has one value: no open, high, low or volume)" if name in TRANSFORMS else ""
        raise InputError(f"{at}: transform {name!r} is unknown here{did_you_mean(str(name), known)}{extra} "
                         f"(known: {', '.join(known)})")
    definition = TRANSFORMS[name]
    defaults = dict(definition.params)
    values = dict(defaults)
    for key, value in item.items():
        if key == "transform":
            continue
        if key not in defaults:
            raise InputError(f"{at}: transform {name} has no parameter {key!r}{did_you_mean(key, defaults)} "
                             f"(its parameters: {', '.join(defaults) or 'none'})")
        values[key] = value
    if "window" in values and (isinstance(values["window"], bool) or not isinstance(values["window"], int)
                               or values["window"] < 2):
        raise InputError(f"{at}: transform {name} window: an integer of at least 2 (got {values['window']!r})")
    if "input" in values:
        if values["input"] not in INPUTS:
            raise InputError(f"{at}: transform {name} input: {values['input']!r} is not a bar column"
                             f"{did_you_mean(str(values['input']), INPUTS)} (known: {', '.join(INPUTS)})")
        if in_series and values["input"] not in ("close", "log_close"):
            raise InputError(f"{at}: transform {name} input: an outside series has one value: use close")
    return TransformFeature(name, tuple((key, values[key]) for key in defaults))


def parse_lag(value: Any, at: str) -> pd.Timedelta:
    """A publication lag such as 1d, 8h or 0h; missing, unreadable or negative is an InputError."""
    if value is None:
        raise InputError(f"{at}: lag: missing: say when each value became known after its timestamp, e.g. "
                         "lag: 1d for a daily value published the next day (lag: 0h if known at its timestamp)")
    try:
        lag = pd.Timedelta(str(value))
    except ValueError:
        raise InputError(f"{at}: lag: {value!r} is not a duration: write e.g. 1d, 8h or 30min") from None
    if lag < pd.Timedelta(0):
        raise InputError(f"{at}: lag: {value!r} is negative: a value cannot be known before its timestamp")
    return lag


def _block(kind: str, item: dict[str, Any], at: str) -> Block:
    allowed = _BLOCK_KEYS[kind]
    for key in item:
        if key != kind and key not in allowed:
            raise InputError(f"{at}: a {kind}: block has no key {key!r}{did_you_mean(str(key), allowed)} "
                             f"(its keys: {kind}, {', '.join(sorted(allowed))})")
    source = item[kind]
    if not isinstance(source, str) or not source.strip():
        what = "a timeframe, e.g. resample: 4h" if kind == "resample" else f"a file, e.g. {kind}: FILE"
        raise InputError(f"{at}: {kind}: write {what}")
    if kind == "resample" and source not in TIMEFRAMES:
        raise InputError(f"{at}: resample: {source!r} is not a timeframe{did_you_mean(source, TIMEFRAMES)} "
                         f"(known: {', '.join(TIMEFRAMES)})")
    options = {key: value for key, value in item.items() if key not in (kind, "features")}
    for key, choices in (("missing", MISSING_POLICIES), ("before_start", BEFORE_START), ("nan", NAN_POLICIES)):
        if key in options and options[key] not in choices:
            raise InputError(f"{at}: {key}: {options[key]!r} is not a policy{did_you_mean(str(options[key]), choices)} "
                             f"(known: {', '.join(choices)})")
    if kind == "series":
        options["lag"] = str(parse_lag(options.get("lag"), at))
    in_series = kind == "series"
    default = ["value"] if in_series else None
    children = item.get("features", default)
    if children is None:
        raise InputError(f"{at}: {kind}: {source}: list its features, e.g. features: [basic]")
    parsed = parse_features(children, f"{at}.features", in_series)
    if kind == "asset" and any(column_cross_sections(parsed)):
        raise InputError(f"{at}: cross_section: another market's features are the same for every asset, so ranking "
                         "them across assets says nothing: drop cross_section inside the asset: block")
    return Block(kind, source, parsed, tuple(sorted(options.items())))


@functools.lru_cache(maxsize=256)
def parse_features_json(text: str) -> tuple[Item, ...]:
    """`parse_features` of a JSON list, memoized: every env copy of a run parses the same list."""
    return parse_features(json.loads(text))


def column_cross_sections(items: tuple[Item, ...]) -> tuple[str | None, ...]:
    """Per column of the feature matrix (in `matrix.build_raw`'s order), its `cross_section:` or None."""
    out: list[str | None] = []
    for item in items:
        if isinstance(item, Block):
            out += column_cross_sections(item.children)
        elif isinstance(item, TaFeature):
            out += [getattr(item, "cross_section", None)] * len(item.columns())
        else:
            out.append(item.cross_section)
    return tuple(out)


def cross_section_refusal(items: tuple[Item, ...]) -> None:
    """A family that trades one asset has no assets to rank a feature across: its first `cross_section:` item is
    refused in one line."""
    for item in items:
        if isinstance(item, Block):
            cross_section_refusal(item.children)
        elif getattr(item, "cross_section", None):
            raise InputError(f"{item.label} cross_section: {item.cross_section} is a cross-sectional transform on one "
                             "asset: it ranks or z-scores a feature across a universe's assets, and this env trades "
                             "one: drop cross_section, or trade a universe with trading/Portfolio-v0")


def file_sources(items: tuple[Item, ...]) -> list[str]:
    """The files the list reads besides the base bars (assets and series), for digests and path checks."""
    return [source for item in items if isinstance(item, Block)
            for source in ([item.source] if item.kind != "resample" else []) + file_sources(item.children)]
