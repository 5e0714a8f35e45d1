"""`train`: env steps/s of DQN training, the platform's CPU preset vs Stable-Baselines3, same budget.

Platform: conf/dqn_btc.yaml as shipped (FastDQN with prioritized replay), through
`experiments.config.load.load_experiment` -> `experiments.hardware.resolve_plan`
(the `cpu` preset) -> `experiments.sweep.rllib_config.build_config` (algos/dqn/) -> `.build_algo()` -> `.train()` until
the step budget is sampled: the code path of `experiments.run`, minus Tune and MLflow (measured separately
by `tracking`), and minus the per-iteration validation episode (SB3 has none; it is evaluation,
not training). Peer: SB3 `DQN("MlpPolicy")` on the same env and env_config with the same hidden
layers, batch size, learning rate, gamma, buffer size, learning start, target update period,
gradient clipping and replay ratio (replayed samples per env step: RLlib's `training_intensity`,
SB3's `batch_size * gradient_steps / train_freq`). Both run in this process with one torch thread
(what `experiments.api.pipeline` sets for the driver). Env steps/s = steps sampled / wall time of the
training loop (algorithm construction and Ray start are reported apart).

SAC rows: conf/sac_btc.yaml as shipped (FastSAC, positions continuous) vs SB3's SAC with the same settings and replay
ratio and the same networks: SB3's actor is already RLlib's shape, and its critics are replaced by RLlib's Q network
(the multi-stream encoder with the conf's fusion net: experiments/benchmark/sb3_rllib_q.py). A variant row gives SB3
with its own, smaller critics (one MLP over observation and action), the peer before 2026-12-05.
"""
from __future__ import annotations

import os
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

from experiments.benchmark.common import REPO, Budget, Figure, Report, require

CONF = REPO / "conf" / "dqn_btc.yaml"
SAC_CONF = REPO / "conf" / "sac_btc.yaml"
TARGET = 1.0


def init_ray() -> float:
    """Start a local Ray without dashboard (or reuse the running one); returns the seconds it took."""
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if ray.is_initialized():
        return 0.0
    start = time.perf_counter()
    ray.init(num_cpus=os.cpu_count() or 2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    return time.perf_counter() - start


def silence_rllib() -> None:
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    for name in ("ray.rllib", "ray.tune", "ray"):
        logging.getLogger(name).setLevel(logging.ERROR)


def platform_experiment(conf: Path, steps: int, extra_overrides: list[str] | None = None):
    """The experiment and plan `experiments.run` would use, with the budget's iteration size."""
    from experiments.config.load import load_experiment
    from experiments.hardware import load_preset, resolve_plan

    base = load_experiment(conf)
    overrides = [
        "evaluation.evaluation_interval=null",
        f"reporting.min_sample_timesteps_per_iteration={min(base.reporting.min_sample_timesteps_per_iteration, steps)}",
        "training.num_steps_sampled_before_learning_starts="
        f"{min(base.training.num_steps_sampled_before_learning_starts, max(steps // 4, 1))}",
        *(extra_overrides or []),
    ]
    exp = load_experiment(conf, overrides)
    plan = resolve_plan(load_preset("cpu"), exp.timeframe, 1, exp.training.train_batch_size_per_learner)
    return exp, plan, overrides


def lifetime(result: dict[str, Any], *path: str) -> float:
    node: Any = result
    for part in path:
        node = node.get(part, {}) if isinstance(node, dict) else {}
    return float(node) if isinstance(node, (int, float)) else 0.0


def train_platform(exp, plan, steps: int, seed: int) -> dict[str, Any]:
    """Build the RLlib algorithm and call train() until `steps` env steps are sampled."""
    from experiments.sweep.rllib_config import build_config

    config = build_config(exp, plan, seed=seed)
    start = time.perf_counter()
    algo = config.build_algo()
    build_s = time.perf_counter() - start
    sampled = trained = 0.0
    iterations = 0
    start = time.perf_counter()
    while sampled < steps:
        result = algo.train()
        iterations += 1
        sampled = lifetime(result, "env_runners", "num_env_steps_sampled_lifetime")
        trained = lifetime(result, "learners", "__all_modules__", "num_module_steps_trained_lifetime")
    train_s = time.perf_counter() - start
    algo.stop()
    learning_starts = exp.training.num_steps_sampled_before_learning_starts
    return {"build_s": build_s, "train_s": train_s, "env_steps": sampled, "iterations": iterations,
            "replayed_samples": trained, "steps_per_s": sampled / train_s,
            "achieved_replay_ratio": trained / max(sampled - learning_starts, 1.0)}


def _train_freq(exp, plan) -> Fraction:
    """SB3's train_freq / gradient_steps for the platform's replay ratio (replayed samples per env step)."""
    training = exp.training
    batch = training.train_batch_size_per_learner
    ratio = training.training_intensity or batch / (exp.env_runners.rollout_fragment_length
                                                    * (plan.num_envs_per_env_runner or 1))
    return Fraction(batch / ratio).limit_denominator(64)


def sb3_settings(exp, plan) -> dict[str, Any]:
    """SB3 DQN arguments equal to the platform's experiment (replay ratio via train_freq/gradient_steps)."""
    training = exp.training
    batch = training.train_batch_size_per_learner
    freq = _train_freq(exp, plan)
    return {
        "learning_rate": training.lr, "gamma": training.gamma, "batch_size": batch,
        "buffer_size": training.replay_buffer.capacity,
        "learning_starts": training.num_steps_sampled_before_learning_starts,
        "target_update_interval": training.target_network_update_freq,
        "train_freq": freq.numerator, "gradient_steps": freq.denominator,
        "exploration_initial_eps": training.epsilon[0][1], "exploration_final_eps": training.epsilon[-1][1],
        "max_grad_norm": training.grad_clip or 10.0,
        "policy_kwargs": {"net_arch": list(exp.rl_module.fcnet_hiddens)},
        "replay_ratio": batch * freq.denominator / freq.numerator,
    }


def sb3_sac_settings(exp, plan) -> dict[str, Any]:
    """SB3 SAC arguments equal to the platform's SAC experiment: learning rate, gamma, tau, batch, buffer, learning
    start, initial entropy weight (tuned toward SB3's auto target, -1 here, as the platform's), twin critics (SB3's
    default; the platform's twin_q), hidden layers, replay ratio, and RLlib's Q network (`q_network`: the multi-stream
    encoder with the experiment's fusion net, experiments/benchmark/sb3_rllib_q.py) in place of SB3's critics."""
    training, module = exp.training, exp.rl_module
    batch = training.train_batch_size_per_learner
    freq = _train_freq(exp, plan)
    return {
        "learning_rate": training.lr, "gamma": training.gamma, "tau": training.tau, "batch_size": batch,
        "buffer_size": training.replay_buffer_capacity,
        "learning_starts": training.num_steps_sampled_before_learning_starts,
        "ent_coef": f"auto_{training.initial_alpha}",
        "train_freq": freq.numerator, "gradient_steps": freq.denominator,
        "policy_kwargs": {"net_arch": list(module.fcnet_hiddens)},
        "q_network": {"hiddens": list(module.fcnet_hiddens), "activation": module.fcnet_activation,
                      "fusion": list(module.fusionnet_hiddens), "head_hiddens": list(module.head_fcnet_hiddens)},
        "replay_ratio": batch * freq.denominator / freq.numerator,
    }


# Variant rows, switched the way a user does it (`--set`): the conf on uniform replay (what SB3 has), and
# the conf on stock RLlib DQN (the same prioritized replay, RLlib's episode buffers and learner loop).
VARIANTS = {
    "uniform replay (as SB3)": ["training.replay_buffer.type=uniform"],
    "stock RLlib DQN (training.implementation: rllib)": ["training.implementation=rllib"],
}


def train_sb3(env_id: str, env_kwargs: dict[str, Any], settings: dict[str, Any], steps: int, seed: int,
              epsilon_steps: int | None, algorithm: str = "DQN") -> dict[str, Any]:
    """SB3's `algorithm` (DQN, with its epsilon schedule over `epsilon_steps`, or SAC, with RLlib's Q network where
    `settings` give one as `q_network`) for `steps` env steps."""
    sb3 = require("stable_baselines3", "stable-baselines3")
    import gymnasium as gym

    import envs  # noqa: F401

    kwargs = {k: v for k, v in settings.items() if k not in ("replay_ratio", "q_network")}
    if epsilon_steps is not None:
        kwargs["exploration_fraction"] = min(1.0, epsilon_steps / steps)
    policy: Any = "MlpPolicy"
    if settings.get("q_network") is not None:
        from experiments.benchmark.sb3_rllib_q import policy_class

        policy = policy_class(settings["q_network"])
    env = gym.make(env_id, **env_kwargs)
    start = time.perf_counter()
    model = getattr(sb3, algorithm)(policy, env, seed=seed, device="cpu", verbose=0, **kwargs)
    build_s = time.perf_counter() - start
    start = time.perf_counter()
    model.learn(total_timesteps=steps)
    train_s = time.perf_counter() - start
    updates = model._n_updates
    return {"build_s": build_s, "train_s": train_s, "env_steps": model.num_timesteps,
            "steps_per_s": model.num_timesteps / train_s, "gradient_updates": updates,
            "achieved_replay_ratio": updates * settings["batch_size"]
            / max(model.num_timesteps - settings["learning_starts"], 1)}


def run(budget: Budget) -> Report:
    steps = budget.pick(full=20_000, quick=300)
    require("stable_baselines3", "stable-baselines3")
    import torch

    torch.set_num_threads(1)
    exp, plan, overrides = platform_experiment(CONF, steps)
    settings = sb3_settings(exp, plan)
    ray_s = init_ray()
    silence_rllib()
    ours = train_platform(exp, plan, steps, budget.seed)
    variants = {}
    for name, extra in (VARIANTS.items() if budget.variants else ()):
        variant_exp, variant_plan, _ = platform_experiment(CONF, steps, extra)
        variants[name] = train_platform(variant_exp, variant_plan, steps, budget.seed)
    theirs = train_sb3(exp.environment.env, _env_kwargs(exp), settings, steps, budget.seed, exp.training.epsilon[-1][0])
    replay = exp.training.replay_buffer.type
    figure = Figure(f"DQN training, env steps/s (platform: {replay} replay, SB3: uniform)", "env steps/s",
                    ours["steps_per_s"], theirs["steps_per_s"], target=f">= {TARGET:.1f}x peer")
    figure.met = figure.ratio is not None and figure.ratio >= TARGET
    figure.note = (f"replay ratio platform {ours['achieved_replay_ratio']:.2f} / SB3 "
                   f"{theirs['achieved_replay_ratio']:.2f} samples per env step; batch {settings['batch_size']}; "
                   f"net {settings['policy_kwargs']['net_arch']}; the platform also does double Q + dueling + "
                   f"{exp.training.n_step}-step returns and, with prioritized replay, a sum-tree draw and a priority "
                   f"update per batch")
    figures = [figure,
               Figure("wall time for the budget", "s", ours["train_s"], theirs["train_s"], higher_is_better=False)]
    for name, result in variants.items():
        variant = Figure(f"same, {name}", "env steps/s", result["steps_per_s"], theirs["steps_per_s"])
        variant.note = f"replay ratio {result['achieved_replay_ratio']:.2f}"
        figures.insert(len(figures) - 1, variant)
    sac = _sac_rows(steps, budget.seed, budget.variants)
    figures += sac.pop("figures")
    details = {
        "steps": steps, "conf": str(CONF.relative_to(REPO)), "overrides": overrides,
        "hardware_plan": plan.as_params() if hasattr(plan, "as_params") else str(plan),
        "platform_algorithm": {"implementation": exp.training.implementation, "double_q": exp.training.double_q,
                               "dueling": exp.training.dueling, "n_step": exp.training.n_step,
                               "replay_buffer": replay,
                               "num_envs_per_env_runner": plan.num_envs_per_env_runner,
                               "num_env_runners": plan.num_env_runners,
                               "rollout_fragment_length": exp.env_runners.rollout_fragment_length,
                               "training_intensity": exp.training.training_intensity},
        "sb3_settings": settings,
        "platform": ours, "variants": variants, "peer": theirs, "sac": sac, "ray_init_s": ray_s,
        "torch_threads": torch.get_num_threads(),
    }
    return Report("train", __doc__.splitlines()[0], "conf/dqn_btc.yaml as shipped (FastDQN, cpu preset)",
                  "Stable-Baselines3 DQN", figures, details)


def _env_kwargs(exp) -> dict[str, Any]:
    return {"config": exp.environment.env_config} if exp.environment.env.startswith("trading/") else \
        dict(exp.environment.env_config)


def _sac_rows(steps: int, seed: int, variants: bool = True) -> dict[str, Any]:
    """SAC on the same env with a continuous position (conf/sac_btc.yaml as shipped: FastSAC) vs SB3's SAC with the
    same settings, replay ratio and Q network (RLlib's, sb3_rllib_q.py); and, as a variant row, vs SB3's SAC with its
    own critics (an MLP of the same widths over observation and action: a smaller network than RLlib's)."""
    exp, plan, overrides = platform_experiment(SAC_CONF, steps)
    settings = sb3_sac_settings(exp, plan)
    ours = train_platform(exp, plan, steps, seed)
    theirs = train_sb3(exp.environment.env, _env_kwargs(exp), settings, steps, seed, None, algorithm="SAC")
    q_network = settings["q_network"]
    figure = Figure("SAC training, env steps/s (conf/sac_btc.yaml: FastSAC, positions continuous; the same Q network "
                    "both sides)", "env steps/s", ours["steps_per_s"], theirs["steps_per_s"],
                    target=f">= {TARGET:.1f}x peer")
    figure.met = figure.ratio is not None and figure.ratio >= TARGET
    figure.note = (f"replay ratio platform {ours['achieved_replay_ratio']:.2f} / SB3 "
                   f"{theirs['achieved_replay_ratio']:.2f} samples per env step; batch {settings['batch_size']}; "
                   f"actor {settings['policy_kwargs']['net_arch']}; twin critics both sides, each RLlib's "
                   f"multi-stream Q (obs and action MLPs {q_network['hiddens']}, fusion {q_network['fusion']} tanh)")
    figures = [figure]
    own = None
    if variants:
        own_settings = {**settings, "q_network": None}
        own = train_sb3(exp.environment.env, _env_kwargs(exp), own_settings, steps, seed, None, algorithm="SAC")
        variant = Figure(f"same, SB3's own critics (an MLP {q_network['hiddens']} over observation and action)",
                         "env steps/s", ours["steps_per_s"], own["steps_per_s"])
        variant.note = f"replay ratio SB3 {own['achieved_replay_ratio']:.2f}; FastSAC's Q network is the larger"
        figures.append(variant)
    return {"figures": figures, "conf": str(SAC_CONF.relative_to(REPO)), "overrides": overrides,
            "sb3_settings": settings, "platform": ours, "peer": theirs, "peer_own_critics": own}
