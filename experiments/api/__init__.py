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
- `data(DataOptions) -> list[str]`: a family's data request (import, show, update... bars files), its report lines.
- `paper(model_uri, bars, PaperOptions) -> PaperResult`: paper-trade a registered model bar by bar, logged to MLflow.
- `serve(model_uri, ServeOptions) -> Server`: a registered model's HTTP server, checked; `.exec()` starts it.
- `explain(key) -> str`, `experiment_schema() -> str`: what a key of an experiment file does; its JSON Schema.
- `machine_fingerprint() -> MachineFingerprint`: digests of numbers this machine computes as a run does.
- `hardware_presets()`, `hardware_plan(preset)`, `hardware_detected()`: the hardware presets, one's plans, this machine.

`plan` and `run` print nothing: pass `on_event=api.events_to_console(console)` to see what `experiments.run` shows,
or any function of one `RunEvent` (experiments/api/events.py). docs/api.md documents each with a runnable example.

These are plain imports, which a type checker and an editor follow. They stay cheap for `python -m experiments.run
--dry-run`: the modules below import MLflow's model code, scoring and the verdict's libraries inside the functions
that need them, not when they are imported (tests/unit/test_api_events.py holds the dry run to that).
"""
from experiments.api.comparison import Comparison, compare
from experiments.api.console_view import events_to_console
from experiments.api.data import DataOptions, data
from experiments.api.describing import experiment_schema, explain
from experiments.api.events import RunEvent
from experiments.api.hardware import (
    Detection,
    PresetPlans,
    PresetSummary,
    hardware_detected,
    hardware_plan,
    hardware_presets,
)
from experiments.api.machine import MachineFingerprint, machine_fingerprint
from experiments.api.model_scoring import score
from experiments.api.options import RunOptions
from experiments.api.paper_trading import PaperEvent, PaperOptions, PaperResult, paper
from experiments.api.result import Plan, RetrainResult, RunResult
from experiments.api.retraining import RetrainOptions, retrain
from experiments.api.runs import plan, run
from experiments.api.serving import ServeOptions, Server, serve
from experiments.api.transfers import transfer
from experiments.plan.run_clock import RunClock
from experiments.records.run_events import OnEvent

__all__ = ["Comparison", "DataOptions", "Detection", "MachineFingerprint", "OnEvent", "PaperEvent", "PaperOptions",
           "PaperResult", "Plan", "PresetPlans", "PresetSummary", "RetrainOptions", "RetrainResult", "RunClock",
           "RunEvent", "RunOptions", "RunResult", "ServeOptions", "Server", "compare", "data", "events_to_console",
           "experiment_schema", "explain", "hardware_detected", "hardware_plan", "hardware_presets",
           "machine_fingerprint", "paper", "plan", "retrain", "run", "score", "serve", "transfer"]
