"""What a run produces and how it ends, below every room that makes or reads it: exit codes and run statuses, the
sweep's parameter space, and the trials' scored checkpoints. `sweep/` writes these and `results/` reads them, so
neither imports the other."""
