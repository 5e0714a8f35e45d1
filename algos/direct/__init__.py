"""The direct learner (`algorithm: direct`): a policy trained by gradient ascent on its own log growth through the
book, without an RL estimator (Jiang, Xu & Liang 2017, docs/learning.md). Its modules: `algorithm` (the table entry
`Direct` and its learner `DirectLearner`, no torch), `rllib_algorithm` and `learner` (RLlib glue: PPO's algorithm
object and torch learner with the direct update, so checkpoints, evaluation, export and serving are PPO's), `batches`
(the draw of a mini-batch of consecutive decisions), and one problem per env family it trains through: `spot` (a
position filled by the ledger) and `portfolio` with its torch book `book` (held equal to the portfolio env's book and
score-to-weight map). Which problem an env family gets is algos/families/direct_problems.py's."""
