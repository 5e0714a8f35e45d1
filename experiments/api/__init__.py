"""The platform as a Python API: every command is a thin shell over these, and a notebook gets typed results.

    from experiments import api
    result = api.run("conf/dqn_btc.yaml", ["tune.num_samples=2"], api.RunOptions(smoke_test=True))
    result.verdict_table()   # per group and baseline: DSR, PBO, wins, the ledger's attempt and effective N

- `plan(path, overrides, options) -> Plan`: what `--dry-run` checks and prints, without Ray.
- `run(path, overrides, options) -> RunResult`: the sweep, its verdict, trials, models, MLflow ids and timings.
- `retrain(path, overrides, RetrainOptions) -> RetrainResult`: challenger, forward test, gate.
- `compare(tracking_uri, experiment) -> Comparison`: an experiment's sweeps and a sweep's trials, as tables.
- `score(model_uri, data) -> EvaluationReport`: a registered model on other data, writing nothing.
- `transfer(model_uri, histories, online)`: the execution agent's zero-shot and online tables, printed and logged.
docs/api.md documents each with a runnable example.
"""
import importlib
from typing import Any

# Each name and the module that defines it, imported on first use: `python -m experiments.run --dry-run` reads only
# what planning needs (not MLflow's model code, scoring or the verdict's libraries), so the API costs it nothing.
_EXPORTS = {
    "Comparison": "experiments.api.comparison", "compare": "experiments.api.comparison",
    "score": "experiments.api.model_scoring",
    "RunOptions": "experiments.api.options",
    "RetrainResult": "experiments.api.result", "RunResult": "experiments.api.result",
    "RetrainOptions": "experiments.api.retraining", "retrain": "experiments.api.retraining",
    "Plan": "experiments.api.runs", "plan": "experiments.api.runs", "run": "experiments.api.runs",
    "transfer": "experiments.api.transfers",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'experiments.api' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
