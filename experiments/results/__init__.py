"""After the sweep: judging every trial out of sample and the verdict against the baselines (values, no side
effects: scoring, verdict, importance), then the one module that prints them (printing), the one that logs them to
MLflow and records the trials ledger's attempt (mlflow_logging), the one that registers the model (registry), and
its promotion."""
