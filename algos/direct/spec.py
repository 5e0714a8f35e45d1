"""`algorithm: direct`: train the policy by gradient ascent on its own mean log growth through the book.

The table entry (no torch, no Ray at load). The policy is PPO's RLModule (the shared-weights portfolio module under
`training.model: shared_assets`), acting greedily as PPO's does on a Box: the Gaussian's mean, clipped to the Box.
Training differentiates the env's own growth, after the exact rebalance cost, with respect to that mean, over
mini-batches of consecutive decisions (algos/direct/portfolio.py). So there is no reward discount, no value net to
fit, no exploration noise. Which env families it serves is their entry's business (`envs.EnvFamily.direct_problem`,
the class that turns one of their envs into a problem); another family, or discrete actions, is refused before Ray
starts.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from algos.portfolio_model import ModelChoice, pop_model_config
from algos.ppo import export_nets as ppo_export_nets  # PPO's module, exported as PPO's
from algos.spec import AlgorithmSpec, BuildInputs, GreedyRule, NumpyExport, TrainingBase, load_class
from envs.errors import InputError

if TYPE_CHECKING:
    from algos.direct.algorithm import DirectConfig

# Decisions/s relative to the preset's declared env steps/s (stock RLlib DQN): a mini-batch of 50 decisions costs one
# forward and backward pass of the small per-asset net, with no env stepped (measured: docs/learning.md).
DIRECT_SPEEDUP = 20.0


class DirectTraining(ModelChoice, TrainingBase):
    lr: float = Field(default=1e-3, gt=0, description="Adam's learning rate (a hardware preset's lr rule scales it "
                                                      "with batch_scaling: preset).")
    train_batch_size_per_learner: int = Field(
        default=50, ge=2,
        description="Consecutive decisions in one mini-batch: one forward pass, one gradient step on their mean log "
                    "growth (Jiang et al. use 50). At most the train part's decisions.")
    updates_per_iteration: int = Field(default=50, ge=1,
                                       description="Gradient steps (mini-batches) per training iteration; each "
                                                   "iteration then scores the validation part.")
    batch_start: Literal["geometric", "uniform"] = Field(
        default="geometric",
        description="How a mini-batch's first decision is drawn: geometric favours the recent end of the train part "
                    "(P ~ (1 - geometric_bias)^(decisions from the end)), uniform draws every start alike.")
    geometric_bias: float = Field(
        default=0.005, gt=0, lt=1,
        description="batch_start geometric: the per-decision decay of a start's probability away from the train "
                    "part's end (0.005: a start 139 decisions back is half as likely).")
    grad_clip: float | None = Field(default=None, gt=0,
                                    description="Clip the gradients' global norm to this; None: no clipping.")


def build(inputs: BuildInputs) -> "DirectConfig":
    """The DirectConfig of one trial, or a whole sweep with Tune domains inside."""
    from algos.common import apply_common
    from algos.direct.algorithm import DirectConfig
    from algos.portfolio_module import with_portfolio_module

    training = dict(inputs.sections["training"])
    training.pop("batch_scaling")  # already applied by the platform's hardware plan
    training.pop("gamma")  # no discounting: each decision's growth is its own
    model = pop_model_config(training)
    direct = {key: training.pop(key) for key in ("updates_per_iteration", "batch_start", "geometric_bias")}
    if training["grad_clip"] is None:
        training.pop("grad_clip")
    batch = training["train_batch_size_per_learner"]
    config = DirectConfig().direct(**direct).training(**training, minibatch_size=batch, num_epochs=1)
    config = apply_common(config, inputs)
    config.env_runners(num_env_runners=0, num_envs_per_env_runner=1)  # nothing samples: the learner reads the data
    return with_portfolio_module(config, "direct", model, inputs.sections["rl_module"])


def check_env(env: Any, env_id: str, training: Any) -> None:
    """Refuse, before Ray starts, an env family this learner cannot differentiate, and what its problem refuses."""
    import envs

    family = envs.family(env_id)
    if family.direct_problem is None:
        served = [name for name, entry in envs.ENVIRONMENTS.items() if entry.direct_problem is not None]
        raise InputError(f"algorithm: direct trains through a differentiable book, and {env_id} has none: use it on "
                         f"{' or '.join(served)}, or another algorithm")
    load_class(family.direct_problem).check(env.unwrapped, training)


SPEC = AlgorithmSpec(
    name="direct",
    training_section=DirectTraining,
    build=build,
    trainable=lambda training: load_class("algos.direct.algorithm:Direct"),
    greedy=GreedyRule(output="action_dist_inputs", box_mean=True),  # the Gaussian's mean in the Box, as trained
    action_spaces=("box",),
    export=NumpyExport(module="ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module:DefaultPPOTorchRLModule",
                       nets=ppo_export_nets, layouts=(("encoder", "pi"),), box=True,
                       portfolio_module="algos.portfolio_module:PortfolioPPOModule"),
    smoke_overrides=("training.updates_per_iteration=5",),
    learner_metrics=("mean_log_growth", "batch_start", "weights_turnover"),
    speedup=lambda training: DIRECT_SPEEDUP,
    check_env=check_env,
)
