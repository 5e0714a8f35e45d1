"""`api.explain(key)` and `api.experiment_schema()`: the experiment file described from its models (what
`python -m experiments.config` prints), as text. Both read the pydantic models, so neither can drift from what a file
accepts."""
from __future__ import annotations


def explain(key: str = "") -> str:
    """What a dotted key of an experiment file does: type, bounds, default and which algorithms or env families have
    it; a section lists its keys, no key lists the sections. InputError (with the nearest key) for an unknown one."""
    from experiments.config.explain import explain as explained

    return explained(key)


def experiment_schema() -> str:
    """The JSON Schema (draft-07) of an experiment file, for editors (conf/experiment.schema.json is this text)."""
    from experiments.config.schema import schema_text

    return schema_text()
