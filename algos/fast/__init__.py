"""The fast off-policy training engine FastDQN and FastSAC share: RLlib's algorithm with flat numpy replay
(`replay`, on a numpy `sum_tree`) and all of an iteration's updates in one learner call (`training_step`, `learner`),
whose update math is plain torch (`losses`; `learner_math` also holds torch-only replicas of the RLModules, which
`experiments.benchmark learner` times without Ray)."""
