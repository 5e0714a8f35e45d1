"""DQN (`algorithm: dqn`): the table entry and its learner (`algorithm`), FastDQN's training step and config
(`fast_dqn`) and its torch learner (`fast_learner`). The fast off-policy engine it shares with SAC is algos/fast/."""
