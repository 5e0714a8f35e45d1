"""RLlib's side of the algorithms: the learner every RLlib algorithm implements (`learner.RLlibLearner`), the config
calls and callbacks every trial shares (`config`), the export of RLlib's default modules to numpy (`export`) and the
trial's own system metrics (`system_metrics`)."""
