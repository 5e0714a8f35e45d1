"""What algos/ writes for one env family's env: the one folder of algos/ whose code may name a family's package or id.
tests/unit/test_algorithm_table.py scans every other module of algos/ for family names, and skips this one.

- `direct_problems`: the problem the direct learner (algos/direct/) trains through, found by the family's class
  (each family with the ability `envs.abilities.TrainsThroughBook` has one there; the problems are torch, which
  envs/ never imports);
- `portfolio_weights`: the portfolio env's score-to-weight rule and the ensemble's inverse of it, which an ensemble
  of portfolio policies averages through (algos/export/ensemble_policy.py);
- `testprio_online`: the test-prioritization agent's comparator in torch, learning online after each CI cycle.
"""
