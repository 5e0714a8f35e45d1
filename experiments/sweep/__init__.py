"""The Tune side of one run: the RLlib config and Tune sweep, live progress, the status file a parent run reads, and
faults outside the run. The run itself (Ray, faults, closing) is experiments/api/pipeline.py, and its sweep's steps
(MLflow parent run, scoring, registration) experiments/api/sweep_steps.py."""
