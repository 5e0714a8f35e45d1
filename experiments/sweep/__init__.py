"""The Tune side of one run: the RLlib config and Tune sweep, live progress, the status file a parent run reads, and
faults outside the run. The run itself (Ray, MLflow parent run, scoring) is experiments/api/pipeline.py."""
