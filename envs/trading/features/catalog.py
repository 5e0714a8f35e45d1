"""What a feature list may name, for people: `python -m experiments.data features [NAME]`."""
from __future__ import annotations

import talib
from talib import abstract

from envs.errors import InputError
from envs.trading.features.talib_functions import TaFeature, output_scales, refusal
from envs.trading.features.transforms import SETS, TRANSFORMS
from envs.validation import did_you_mean

SCALE_WORDS = {"level": "x / close - 1", "price": "x / close", "price2": "x / close^2",
               "volume": "x / mean volume over its window", "none": "as is"}


def list_functions() -> list[str]:
    lines = ["sets: " + ", ".join(f"{name} ({len(items)} features)" for name, items in SETS.items()),
             "transforms ({transform: NAME, ...}, or the bare name for its defaults):"]
    for name, transform in TRANSFORMS.items():
        params = ", ".join(f"{key}={default}" for key, default in transform.params)
        lines.append(f"  {name}{f' ({params})' if params else ''}: {transform.doc}")
    refused = []
    for group, names in talib.get_function_groups().items():
        allowed = [name for name in names if refusal(name) is None]
        refused += [f"  {name}: {refusal(name)}" for name in names if refusal(name)]
        if allowed:
            lines.append(f"TA-Lib {group} ({{ta: NAME, param: value, outputs: [...]}}): {', '.join(allowed)}")
    return [*lines, "TA-Lib functions a feature list cannot name, and why:", *refused]


def describe_function(name: str) -> list[str]:
    if name in TRANSFORMS:
        transform = TRANSFORMS[name]
        params = ", ".join(f"{key} (default {default})" for key, default in transform.params) or "none"
        return [f"transform {name}: {transform.doc}", f"parameters: {params}",
                f"warm-up with its defaults: {transform.first_valid(**dict(transform.params)) + 1} bars"]
    upper = name.upper()
    if upper not in talib.get_functions():
        raise InputError(f"{name!r} is neither a transform nor a TA-Lib function"
                         f"{did_you_mean(upper, [*talib.get_functions(), *TRANSFORMS])}")
    info = abstract.Function(upper).info
    lines = [f"{upper}: {info['display_name']} ({info['group']})",
             f"inputs: {', '.join(f'{k}={v}' for k, v in info['input_names'].items())}"]
    reason = refusal(upper)
    if reason:
        return [*lines, f"refused as a feature: {reason}"]
    feature = TaFeature.parse({"ta": upper}, upper)
    params = ", ".join(f"{key}={value}" for key, value in info["parameters"].items()) or "none"
    scales = output_scales(upper)
    outputs = ", ".join(f"{output} ({SCALE_WORDS[scale]})"
                        for output, scale in zip(info["output_names"], scales, strict=True))
    return [*lines, f"parameters: {params}", f"outputs: {outputs}",
            f"with its defaults: TA-Lib lookback {abstract.Function(upper).lookback} bars, and {feature.unstable_bars} "
            "more per recursive stage until its values forget where the series started (TA-Lib's unstable "
            f"period): warm-up {feature.first_valid + 1} bars",
            f"e.g. {{ta: {upper}{''.join(f', {k}: {v}' for k, v in info['parameters'].items())}}}"]
