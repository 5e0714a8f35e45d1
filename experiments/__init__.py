"""The platform layer. The modules here are the commands users run (`python -m experiments.run`, `.data`,
`.compare`, `.retrain`, `.serve`, `.paper`, `.cross_cpu`, `.hardware`, `.benchmark`); the
sub-packages follow one run: config -> plan -> sweep (with storage and tracking) -> results (docs/DESIGN.md)."""
