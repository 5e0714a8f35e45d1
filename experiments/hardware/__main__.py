"""`python -m experiments.hardware list | show NAME|PATH | detect`: look at presets before spending money.

User mistakes (unknown preset, malformed file) print one line on stderr and exit 2. A thin shell over
`api.hardware_presets`, `api.hardware_plan` and `api.hardware_detected` (experiments/api/hardware.py).
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.table import Table

from experiments import api
from experiments.shell import exit_code

SHOW_TIMEFRAMES = ("1h", "1d")
DEFAULT_ENV_STEPS = 100_000
PIPED_WIDTH = 140


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand, ending as every command does (experiments.shell.exit_code)."""
    args = _parser().parse_args(argv)
    # Rich wraps at 80 columns when piped; tables are unreadable at that width.
    console = Console(width=None if sys.stdout.isatty() else PIPED_WIDTH)
    return exit_code(lambda: args.handler(args, console) or 0)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m experiments.hardware", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="table of all presets in conf/hardware").set_defaults(handler=_list)
    show = sub.add_parser("show", help="one preset and its resolved plan for 1h and 1d")
    show.add_argument("preset", help="preset name (e.g. rtx_4090) or path to a YAML file")
    show.add_argument(
        "--trials", type=int, default=None, help="trials in the sweep (default: as many as run at once)"
    )
    show.add_argument(
        "--env-steps", type=int, default=DEFAULT_ENV_STEPS, help="env steps per trial for the estimate"
    )
    show.set_defaults(handler=_show)
    sub.add_parser("detect", help="what this machine is and which preset it maps to").set_defaults(
        handler=_detect
    )
    return parser


def _gpus_text(preset) -> str:
    if preset.gpu_count == 0 or preset.gpu_model is None:
        return "-"
    model = preset.gpu_model.removeprefix("NVIDIA ")
    return model if preset.gpus else f"{preset.gpu_count}x {model}"


def _large_batch_text(preset) -> str:
    """The preset's opt-in large batches for 1h/1d and their lr rule, or '-' (experiments/hardware/batch.py)."""
    if preset.large_batch is None:
        return "-"
    sizes = preset.large_batch.batch_size_per_timeframe
    return "/".join(str(sizes.get(tf, preset.large_batch.default_batch_size)) for tf in SHOW_TIMEFRAMES) + (
        f" ({preset.large_batch.lr_rule} lr)")


def _list(_: argparse.Namespace, console: Console) -> None:
    table = Table(title="Hardware presets (conf/hardware)")
    for column in ("name", "GPUs", "VRAM", "strategy", "trials at once", "opt-in batch 1h/1d", "$/h"):
        table.add_column(
            column, justify="right" if column in ("VRAM", "trials at once", "$/h") else "left", no_wrap=True
        )
    for summary in api.hardware_presets():
        preset = summary.preset
        table.add_row(
            preset.name,
            _gpus_text(preset),
            f"{preset.vram_gb:g} GB" if preset.vram_gb else "-",
            preset.strategy,
            str(summary.trials_at_once),
            _large_batch_text(preset),
            f"{preset.price_per_hour_usd:g}" if preset.price_per_hour_usd is not None else "-",
        )
    console.print(table)


def _show(args: argparse.Namespace, console: Console) -> None:
    shown = api.hardware_plan(args.preset, args.trials, args.env_steps, SHOW_TIMEFRAMES)
    table = Table(title=f"Preset {shown.preset.name}", show_header=False)
    table.add_column("key")
    table.add_column("value", overflow="fold")
    for key, value in shown.preset.model_dump().items():
        table.add_row(key, "null" if value is None else str(value))
    console.print(table)
    for plan in shown.timeframes:
        console.print(f"[bold]{plan.timeframe}[/bold]: {plan.plan}", highlight=False)
        console.print(f"    {plan.estimate}", highlight=False)
        console.print(f"    {plan.batch}", highlight=False)
        if plan.opt_in is not None:
            console.print(f"    opt-in: {plan.opt_in}", highlight=False)


def _detect(_: argparse.Namespace, console: Console) -> None:
    detected = api.hardware_detected()
    console.print(f"This machine: {detected.machine}", highlight=False)
    console.print(f"Detected preset: [bold]{detected.preset}[/bold] ({detected.reason})", highlight=False)
    if detected.warning:
        console.print(f"[yellow]warning:[/yellow] {detected.warning}", highlight=False)
    if detected.override:
        console.print(f"{detected.variable}={detected.override} is set: runs use it instead of detection",
                      highlight=False)
    console.print(detected.plan, highlight=False)


if __name__ == "__main__":
    sys.exit(main())
