"""`python -m experiments.benchmark`: the platform's speed, measured against peers in the same run.

Sub-benchmarks (each runs the platform and its peer one after the other in one process, so
both see the same machine and the same load):

- `reference`: this machine's speed today, one number (the fastest of 200 passes of 30 TA-Lib indicators over the
              bundled bars, ~3 s): the README gives every wall time with its day's reference (no peer),
- `env`:      steps/s of `trading/Spot-v0` vs gym-anytrading's StocksEnv on the same BTC bars
              (single env, and 8 envs in gymnasium's SyncVectorEnv),
- `train`:    env steps/s of DQN training on the platform's CPU preset (experiments.config.experiment ->
              experiments.hardware -> algos.dqn.algorithm -> `.build_algo().train()`) vs Stable-Baselines3 DQN
              with the same network, batch size and replay ratio, for the same step budget; and SAC
              (conf/sac_btc.yaml, FastSAC) vs SB3's SAC with RLlib's Q network, the same settings,
- `solve`:    wall time until CartPole-v1 greedy evaluation return >= 475 with conf/dqn_cartpole.yaml
              vs SB3 with the RL Zoo's CartPole hyperparameters,
- `tracking`: time MLflow logging adds per Tune result, Tune's stock MLflowLoggerCallback vs the
              platform's MlflowTrialCallback, on a real ~350-key RLlib result, local sqlite store,
- `cli`:      wall time of `python -m experiments.run conf/dqn_btc.yaml --dry-run` (no peer) in a fresh storage root
              (empty feature cache), and again in that root (warm),
- `testgen`:  executions/s of the generation agent's environment (agents/TestGeneration-v0, coverage traced)
              vs Atheris on the same program, seeds and tracer, per program under test,
- `features`, `operations`: see their modules,
- `testprio`: training the cross-project execution agent and ranking one CI cycle with it vs learning-to-rank.
- `system`:   DQN training with each trial's system metrics sampled vs without (tracking.system_metrics).
- `portfolio_env`: steps/s of `trading/Portfolio-v0` vs FinRL 0.3.7's StockPortfolioEnv on the same daily closes
              of 20 and 500 assets (the peer charges no costs and holds no cash).
- `paper_poll`: one paper-trading poll of a 500-asset universe (only the files or CSV rows that changed are read)
              vs the whole re-read of every file each poll did before, as 500 parquets and as one wide CSV.
- `jobs`:     wall time of the main job, `python -m experiments.run conf/dqn_btc.yaml`, from the command line
              against two minutes, and of conf/sac_btc.yaml against 1.5x that, each with where its time went
              (plan, Ray start, training, between iterations, trial starts, scoring, shutdown; no peer).
- `learner`:  one FastDQN and one FastSAC update (forward, loss, backward, clip, fused Adam, soft target update)
              timed without Ray on torch replicas of their RLModules, minibatch 32 to 4096, fp32, bf16 and
              compiled, on CUDA if available else one CPU thread (no peer); and one update of the direct learner
              (64 consecutive decisions of N = 20 and 500 assets) vs one PPO minibatch of 256 of the same net.

Peers come from the `bench` extra (`pip install -e .[bench]`); a sub-benchmark whose peer is
missing is skipped with the install command. Results: `runs/benchmarks/<name>.json` (untracked);
`--output benchmarks/results` replaces the tracked figures the docs cite.
"""
from experiments.benchmark.common import BENCHMARKS, PeerMissing

__all__ = ["BENCHMARKS", "PeerMissing"]
