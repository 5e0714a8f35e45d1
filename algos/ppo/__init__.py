"""PPO (`algorithm: ppo`): the table entry and its learner (`algorithm`), RLlib's PPO as shipped."""
