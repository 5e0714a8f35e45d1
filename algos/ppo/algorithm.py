"""PPO (clipped surrogate objective, GAE, optional KL penalty): RLlib's PPO on the new API stack.

Added through the algorithm table to keep the platform honest about not being DQN-shaped: the same
experiment file sections, hardware plan, Tune sweep, scoring, registry and resume serve it. The table entry (`PPO`)
and its learner (`PPOLearner`, an RLlib learner); the `training` section (`PPOTraining`) mirrors
`PPOConfig.training`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field, model_validator

from algos.base import Algorithm, NumpyLayouts
from algos.export.torch_layers import not_exportable
from algos.greedy import GreedyRule
from algos.inputs import BuildInputs, TrainingBase
from algos.networks.portfolio_model import ModelChoice, pop_model_config
from algos.rllib.learner import RLlibLearner

if TYPE_CHECKING:
    from ray.rllib.algorithms.ppo import PPOConfig

# Env steps/s relative to the preset's declared rate (stock RLlib DQN): PPO does a few epochs over each batch
# instead of a replayed update every few env steps. conf/ppo_cartpole.yaml on the cpu preset ran ~2,400 env steps/s
# (solved in 16k env steps, 6.7 s of training, seed 0), where the preset declares 300 for stock RLlib DQN.
PPO_SPEEDUP = 8.0


class PPOTraining(ModelChoice, TrainingBase):
    lr: float = Field(default=3e-4, gt=0, description="The optimizer's learning rate (a hardware preset's lr rule "
                                                      "scales it with batch_scaling: preset).")
    train_batch_size_per_learner: int = Field(
        default=4000, ge=1,
        description="Env steps collected per learner per update (the rollout batch), then num_epochs passes over it "
                    "in minibatches of minibatch_size; larger is steadier, slower to update.")
    minibatch_size: int = Field(default=128, ge=1,
                                description="Samples per gradient step within an epoch; at most the rollout batch.")
    num_epochs: int = Field(default=10, ge=1,
                            description="Passes over each rollout batch: more reuses the data, at the risk of moving "
                                        "the policy too far.")
    lambda_: float = Field(default=1.0, ge=0, le=1,
                           description="GAE lambda: lower trades the advantage estimate's variance for bias.")
    clip_param: float = Field(default=0.3, gt=0,
                              description="The surrogate objective's clip: how far one update may move the policy's "
                                          "action probabilities.")
    vf_clip_param: float = Field(default=10.0, gt=0,
                                 description="Clip of the value loss; set it to the scale of the returns.")
    vf_loss_coeff: float = Field(default=1.0, ge=0, description="Weight of the value loss in the total loss.")
    entropy_coeff: float = Field(default=0.0, ge=0,
                                 description="Weight of the entropy bonus: higher keeps the policy exploring longer.")
    use_kl_loss: bool = Field(default=True,
                              description="Add a KL penalty to the loss, adapted toward kl_target.")
    kl_coeff: float = Field(default=0.2, ge=0, description="The KL penalty's initial weight (use_kl_loss).")
    kl_target: float = Field(default=0.01, gt=0,
                             description="The KL divergence per update the penalty's weight steers toward.")
    grad_clip: float | None = Field(default=None, gt=0,
                                    description="Clip the gradients' global norm to this; None: no clipping.")

    @model_validator(mode="after")
    def _minibatch_fits(self) -> "PPOTraining":
        if self.minibatch_size > self.train_batch_size_per_learner:
            raise ValueError(f"minibatch_size {self.minibatch_size} is larger than train_batch_size_per_learner "
                             f"{self.train_batch_size_per_learner}: make it at most the rollout batch")
        return self


class PPOLearner(RLlibLearner):
    """RLlib's PPO with its default module (the numpy export serves its discrete actions) or, under
    `training.model`, the portfolio module."""

    learner_metrics = ("policy_loss", "vf_loss", "vf_loss_unclipped", "vf_explained_var", "entropy", "mean_kl_loss",
                       "curr_kl_coeff", "curr_entropy_coeff")
    numpy_layouts = NumpyLayouts(default=(("encoder", "pi"),), portfolio=True)

    def build(self, inputs: BuildInputs) -> "PPOConfig":
        """The PPOConfig for one trial, or a whole sweep with Tune domains inside."""
        from ray.rllib.algorithms.ppo import PPOConfig  # here, not at module load: see DQNLearner.build

        from algos.networks.portfolio_module import with_portfolio_module
        from algos.rllib.config import apply_common

        training = dict(inputs.sections["training"])
        training.pop("batch_scaling")  # already applied by the platform's hardware plan
        model = pop_model_config(training)
        if training["grad_clip"] is None:
            training.pop("grad_clip")
        config = apply_common(PPOConfig().training(**training), inputs)
        return with_portfolio_module(config, self.portfolio_module(), model, inputs.sections["rl_module"])

    def trainable(self, training: dict[str, Any]) -> Any:
        return "PPO"

    def default_module(self) -> type:
        from ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module import DefaultPPOTorchRLModule

        return DefaultPPOTorchRLModule

    def portfolio_module(self) -> type:
        from algos.networks.portfolio_module import PortfolioPPOModule

        return PortfolioPPOModule

    def policy_nets(self, module: Any) -> tuple[Any, dict[str, Any]]:
        """The actor's MLP encoder (the shared one, or the actor's own: a separate critic's never reaches the logits)
        and the pi head. The stateful encoder, which wraps LSTM/GRU encoders, is refused."""
        from ray.rllib.core.models.torch.encoder import TorchActorCriticEncoder

        if type(module.encoder) is not TorchActorCriticEncoder:
            raise not_exportable(f"PPO encoder {type(module.encoder).__name__}")
        encoder = module.encoder.encoder if module.encoder.config.shared else module.encoder.actor_encoder
        return encoder, {"pi": module.pi}


class PPO(Algorithm):
    name = "ppo"
    training_section = PPOTraining
    # The most probable action of the categorical; on a Box, the diagonal Gaussian's mean, in the Box.
    greedy = GreedyRule(output="action_dist_inputs", argmax=True, box_mean=True)
    # RLlib's PPO; the numpy export covers discrete actions and the portfolio modules (training.model)
    action_spaces = ("discrete", "box")
    learner = PPOLearner()
    smoke_overrides = ("training.train_batch_size_per_learner=256", "training.minibatch_size=64",
                       "training.num_epochs=2")

    def speedup(self, training: Any) -> float:
        return PPO_SPEEDUP
