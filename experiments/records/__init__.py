"""What a run produces and how it ends, below every room that makes or reads it: exit codes and run statuses, the
sweep's parameter space, the trials' scored checkpoints, and the rule that reads their learning curves. `sweep/`
writes these and `results/` reads them, so neither imports the other."""
