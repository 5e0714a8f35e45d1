"""One run of an experiment: the pipeline that owns it, the RLlib config and Tune sweep, live progress, faults
outside the run, and several experiments side by side on one Ray cluster."""
