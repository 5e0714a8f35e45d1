"""The execution agent's environment: prioritizing test cases in continuous integration.

Learned from real CI histories (RETECS and the enriched Apache data sets) or from a
seeded synthetic history. Modules, in data-flow order:

* `data`: load either CSV format into a causal `CIHistory` (outcomes kept apart), or pool several;
* `synthetic`: generate a CI history when no data is given;
* `features`: per-test features from pre-cycle information, scaled on the training cycles, or
  portable (no statistic of any history: one model for every project);
* `dataset`: env_config -> loaded, time-split, featurized data, one history or several pooled (cached per process);
* `env`: the pointwise and pairwise Gymnasium environments;
* `metrics`, `baselines`, `learning_to_rank`, `ranking`, `evaluate`: out-of-sample scoring against baselines;
* `cycle_reader`: a registered model's raw input, one cycle's table (pyfunc);
* `transfer`: a registered model scored on a history it never saw, zero-shot and online.
"""
