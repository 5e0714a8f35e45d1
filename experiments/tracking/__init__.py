"""MLflow: the tracking store, the trial callback that gives every trial its run, and runs a dead server left open."""
