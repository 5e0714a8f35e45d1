"""PPO (clipped surrogate objective, GAE, optional KL penalty): RLlib's PPO on the new API stack.

Added through the algorithm table to keep the platform honest about not being DQN-shaped: the same
experiment file sections, hardware plan, Tune sweep, scoring, registry and resume serve it. The
`training` section (`PPOTraining`) mirrors `PPOConfig.training`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, model_validator

from algos.portfolio_model import ModelChoice, pop_model_config
from algos.spec import AlgorithmSpec, BuildInputs, GreedyRule, TrainingBase

if TYPE_CHECKING:
    from ray.rllib.algorithms.ppo import PPOConfig

# Env steps/s relative to the preset's declared rate (stock RLlib DQN): PPO does a few epochs over each batch
# instead of a replayed update every few env steps. conf/ppo_cartpole.yaml on the cpu preset ran ~2,400 env steps/s
# (solved in 16k env steps, 6.7 s of training, seed 0), where the preset declares 300 for stock RLlib DQN.
PPO_SPEEDUP = 8.0


class PPOTraining(ModelChoice, TrainingBase):
    lr: float = Field(default=3e-4, gt=0)
    # Env steps collected per learner per update (the rollout batch), then `num_epochs` passes over it in
    # minibatches of `minibatch_size`.
    train_batch_size_per_learner: int = Field(default=4000, ge=1)
    minibatch_size: int = Field(default=128, ge=1)
    num_epochs: int = Field(default=10, ge=1)
    lambda_: float = Field(default=1.0, ge=0, le=1)      # GAE lambda
    clip_param: float = Field(default=0.3, gt=0)
    vf_clip_param: float = Field(default=10.0, gt=0)
    vf_loss_coeff: float = Field(default=1.0, ge=0)
    entropy_coeff: float = Field(default=0.0, ge=0)
    use_kl_loss: bool = True
    kl_coeff: float = Field(default=0.2, ge=0)
    kl_target: float = Field(default=0.01, gt=0)
    grad_clip: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _minibatch_fits(self) -> "PPOTraining":
        if self.minibatch_size > self.train_batch_size_per_learner:
            raise ValueError(f"minibatch_size {self.minibatch_size} is larger than train_batch_size_per_learner "
                             f"{self.train_batch_size_per_learner}: make it at most the rollout batch")
        return self


def build(inputs: BuildInputs) -> "PPOConfig":
    """The PPOConfig for one trial, or a whole sweep with Tune domains inside."""
    from ray.rllib.algorithms.ppo import PPOConfig  # here, not at module load: see algos.dqn.build

    from algos.common import apply_common
    from algos.portfolio_module import with_portfolio_module

    training = dict(inputs.sections["training"])
    training.pop("batch_scaling")  # already applied by the platform's hardware plan
    model = pop_model_config(training)
    if training["grad_clip"] is None:
        training.pop("grad_clip")
    config = apply_common(PPOConfig().training(**training), inputs)
    return with_portfolio_module(config, "ppo", model, inputs.sections["rl_module"])


SPEC = AlgorithmSpec(
    name="ppo",
    training_section=PPOTraining,
    build=build,
    trainable=lambda training: "PPO",
    # The most probable action of the categorical; on a Box, the diagonal Gaussian's mean, in the Box.
    greedy=GreedyRule(output="action_dist_inputs", argmax=True, box_mean=True),
    # RLlib's PPO; the numpy export covers discrete actions and the portfolio modules (training.model)
    action_spaces=("discrete", "box"),
    smoke_overrides=("training.train_batch_size_per_learner=256", "training.minibatch_size=64",
                     "training.num_epochs=2"),
    learner_metrics=("policy_loss", "vf_loss", "vf_loss_unclipped", "vf_explained_var", "entropy", "mean_kl_loss",
                     "curr_kl_coeff", "curr_entropy_coeff"),
    speedup=lambda training: PPO_SPEEDUP,
)
