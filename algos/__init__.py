"""RLlib algorithm builders and non-RL baselines."""
