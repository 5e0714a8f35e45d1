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
from experiments.api.comparison import Comparison, compare
from experiments.api.model_scoring import score
from experiments.api.options import RunOptions
from experiments.api.result import RetrainResult, RunResult
from experiments.api.retraining import RetrainOptions, retrain
from experiments.api.runs import Plan, plan, run
from experiments.api.transfers import transfer

__all__ = ["Comparison", "Plan", "RetrainOptions", "RetrainResult", "RunOptions", "RunResult", "compare", "plan",
           "retrain", "run", "score", "transfer"]
