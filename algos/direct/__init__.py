"""The direct learner (`algorithm: direct`): a policy trained by gradient ascent on its own log growth through the
book, without an RL estimator (Jiang, Xu & Liang 2017, docs/learning.md). Its modules: `spec` (the table entry, no
torch), `book` (the torch book and score-to-weight map, held equal to envs/portfolio/book.py and weights.py),
`portfolio` (the problem of trading/Portfolio-v0: batches, memory, loss), `learner` and `algorithm` (RLlib glue, so
checkpoints, evaluation, export and serving are PPO's)."""
