"""SAC (`algorithm: sac`): the table entry and its learner (`algorithm`), FastSAC's training step and config
(`fast_sac`), its torch learner (`fast_learner`) and the greedy squashed Gaussian of RLlib's evaluation (`catalog`).
The fast off-policy engine it shares with DQN is algos/fast/."""
