"""After the sweep: scoring every trial out of sample, the verdict against the baselines, the trials ledger,
feature importance, the registered model and its promotion."""
