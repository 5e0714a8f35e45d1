"""`algorithm: direct`: train the policy by gradient ascent on its own mean log growth through the book.

The table entry (`Direct`) and its learner (`DirectLearner`); no torch, no Ray at load. The policy is PPO's RLModule
(the shared-weights portfolio module under `training.model: shared_assets`), acting greedily as PPO's does on a Box:
the Gaussian's mean, clipped to the Box. Training differentiates the env's own growth, after the exact rebalance
cost, with respect to that mean, over mini-batches of consecutive decisions (algos/direct/portfolio.py). So there is
no reward discount, no value net to fit, no exploration noise. It serves the env families that have a differentiable
book (`envs.abilities.TrainsThroughBook`; their problem: algos/families/direct_problems.py); another family, or
discrete actions, is refused before Ray starts.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from algos.base import Algorithm, NumpyLayouts
from algos.greedy import GreedyRule
from algos.inputs import BuildInputs, TrainingBase
from algos.networks.portfolio_model import ModelChoice, pop_model_config
from algos.ppo.algorithm import PPOLearner
from envs.errors import InputError

if TYPE_CHECKING:
    from algos.direct.rllib_algorithm import DirectConfig

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


class DirectLearner(PPOLearner):
    """PPO's learner with another training step: RLlib's PPO algorithm object (its RLModule, checkpoints, greedy
    evaluation and weight sync) whose iteration runs the direct update inside RLlib's torch learner instead of
    sampling and PPO's loss (algos/direct/rllib_algorithm.py). So it trains, reports and exports PPO's modules as an
    RLlib learner does; only its build, what Tune runs and its learner metrics are its own, and its default module
    acts in a Box (the target exposure)."""

    learner_metrics = ("mean_log_growth", "batch_start", "weights_turnover")
    numpy_layouts = NumpyLayouts(default=(("encoder", "pi"),), box=True, portfolio=True)

    def build(self, inputs: BuildInputs) -> "DirectConfig":
        """The DirectConfig of one trial, or a whole sweep with Tune domains inside."""
        from algos.direct.rllib_algorithm import DirectConfig
        from algos.networks.portfolio_module import with_portfolio_module
        from algos.rllib.config import apply_common

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
        return with_portfolio_module(config, self.portfolio_module(), model, inputs.sections["rl_module"])

    def trainable(self, training: dict[str, Any]) -> Any:
        from algos.direct.rllib_algorithm import Direct as DirectAlgorithm

        return DirectAlgorithm


class Direct(Algorithm):
    name = "direct"
    training_section = DirectTraining
    greedy = GreedyRule(output="action_dist_inputs", box_mean=True)  # the Gaussian's mean in the Box, as trained
    action_spaces = ("box",)
    learner = DirectLearner()
    smoke_overrides = ("training.updates_per_iteration=5",)

    def speedup(self, training: Any) -> float:
        return DIRECT_SPEEDUP

    def check_env(self, env: Any, env_id: str, training: Any) -> None:
        """Refuse, before Ray starts, an env family without a differentiable book, and what its problem refuses."""
        import envs
        from algos.families.direct_problems import problem_class
        from envs.abilities import TrainsThroughBook, able

        family = envs.family(env_id)
        if not isinstance(family, TrainsThroughBook):
            raise InputError(f"algorithm: direct trains through a differentiable book, and {env_id} has none: use it "
                             f"on {' or '.join(able(TrainsThroughBook, envs.FAMILIES))}, or another algorithm")
        problem_class(family).check(env.unwrapped, training)
