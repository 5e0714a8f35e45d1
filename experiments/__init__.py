"""CLI entry points and orchestration: run, config, hardware, sweep, tracking, evaluate, data, benchmark."""
