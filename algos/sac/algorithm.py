"""SAC (soft actor-critic: twin Q, entropy-tuned alpha, squashed Gaussian policy) for continuous (Box) actions:
`training.implementation: fast` (the default) runs `algos.sac.fast_sac.FastSAC`, RLlib's SAC module, loss and
checkpoints with flat numpy replay and many updates per learner call; `rllib` runs RLlib's SAC as shipped.

The table entry (`SAC`) and its learner (`SACLearner`, an RLlib learner). The `training` section (`SACTraining`)
mirrors `SACConfig.training`. One `lr` drives the actor, the critic and alpha unless `actor_lr`, `critic_lr` or
`alpha_lr` says otherwise, so the hardware plan, which reads and scales `lr`, scales every optimizer at once. The
replay buffer is uniform, as in the SAC papers, unless `replay_buffer_type: prioritized` (fast only).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator, model_validator

from algos.base import Algorithm, NumpyLayouts
from algos.greedy import GreedyRule
from algos.inputs import BuildInputs, TrainingBase
from algos.networks.portfolio_model import ModelChoice, pop_model_config
from algos.rllib.learner import RLlibLearner

if TYPE_CHECKING:
    from ray.rllib.algorithms.sac import SACConfig

# The learning rates that follow `lr` unless set.
OWN_LRS = ("actor_lr", "critic_lr", "alpha_lr")
# replay_buffer_type -> the buffer name RLlib's config validation accepts (FastSAC maps it to its flat buffer).
REPLAY_BUFFERS = {"uniform": "EpisodeReplayBuffer", "prioritized": "PrioritizedEpisodeReplayBuffer"}
# Env steps/s relative to the preset's declared rate (stock RLlib DQN) at one update per env step, per
# implementation: an update costs RLlib's SAC ~20-30 ms on 2 cores (episode replay sampling and learner connectors
# more than the [64, 64] nets), so conf/sac_pendulum.yaml (batch 64, twin Q) ran 42 env steps/s on the cpu preset,
# which declares 300; FastSAC's update costs ~2 ms (docs/benchmarks.md).
SPEEDUP_AT_ONE_UPDATE_PER_STEP = {"rllib": 0.14, "fast": 1.5}


class SACTraining(ModelChoice, TrainingBase):
    implementation: Literal["fast", "rllib"] = Field(
        default="fast",
        description="fast: algos.sac.fast_sac.FastSAC, RLlib's SAC RLModule and loss with flat numpy replay and many "
                    "minibatch updates per learner call (docs/benchmarks.md); rllib: RLlib's SAC as shipped.")
    env_steps_per_learner_call: int = Field(
        default=256, ge=1,
        description="implementation fast only: env steps sampled before each learner call, which then runs all the "
                    "updates they owe; larger amortizes the call, the policy acting on slightly older weights.")
    lr: float = Field(default=3e-4, gt=0,
                      description="The learning rate of the actor, the critic and alpha unless actor_lr, critic_lr or "
                                  "alpha_lr says otherwise (the hardware plan scales it).")
    actor_lr: float | None = Field(default=None, gt=0, description="The policy's own learning rate; None: lr.")
    critic_lr: float | None = Field(default=None, gt=0, description="The Q networks' own learning rate; None: lr.")
    alpha_lr: float | None = Field(default=None, gt=0,
                                   description="The entropy weight alpha's own learning rate; None: lr.")
    train_batch_size_per_learner: int = Field(default=256, ge=1,
                                              description="Replayed transitions per update per learner.")
    grad_clip: float | None = Field(default=None, gt=0,
                                    description="Clip the gradients' global norm to this; None: no clipping.")
    tau: float = Field(default=5e-3, gt=0, le=1,
                       description="The target networks' soft-update rate: the share of the online weights blended in "
                                   "per update.")
    initial_alpha: float = Field(default=1.0, gt=0,
                                 description="The entropy weight's start; it is then tuned toward target_entropy.")
    target_entropy: Literal["auto"] | float = Field(
        default="auto",
        description="The policy entropy alpha steers toward: auto (minus the number of action dimensions) or a "
                    "number; lower explores less.")
    twin_q: bool = Field(default=True, description="Two Q networks, the smaller estimate is used (curbs "
                                                   "overestimation).")
    n_step: int = Field(default=1, ge=1, description="Rewards summed before bootstrapping from Q.")
    replay_buffer_capacity: int = Field(default=1_000_000, ge=100,
                                        description="Transitions the replay buffer holds; the oldest are dropped "
                                                    "first.")
    replay_buffer_type: Literal["uniform", "prioritized"] = Field(
        default="uniform",
        description="uniform draws every stored transition alike (the SAC papers); prioritized (implementation fast) "
                    "replays large-TD-error transitions more often, with algos/fast/replay.py's defaults (alpha 0.6, "
                    "beta 0.4 annealed to 1).")
    num_steps_sampled_before_learning_starts: int = Field(
        default=1500, ge=0, description="Env steps sampled (random actions) before the first update.")
    training_intensity: float | None = Field(
        default=None, gt=0,
        description="Replayed samples per sampled env step (256 with batch 256: one update per env step); None keeps "
                    "RLlib's native ratio, one batch per sample call.")

    @field_validator("target_entropy", mode="before")
    @classmethod
    def _auto_or_number(cls, value: Any) -> Any:
        """One readable refusal instead of one per member of the union."""
        if value == "auto" or (isinstance(value, (int, float)) and not isinstance(value, bool)):
            return value
        raise ValueError("write auto (minus the number of action dimensions) or a number")

    @model_validator(mode="after")
    def _prioritized_is_fast(self) -> "SACTraining":
        if self.replay_buffer_type == "prioritized" and self.implementation == "rllib":
            raise ValueError("replay_buffer_type prioritized needs implementation fast (RLlib's SAC replays "
                             "uniformly here)")
        return self

    @model_validator(mode="after")
    def _scaled_lr_drives_all(self) -> "SACTraining":
        """batch_scaling: preset scales `lr` only; a rate of its own would silently stay unscaled."""
        own = [key for key in OWN_LRS if getattr(self, key) is not None]
        if self.batch_scaling == "preset" and own:
            raise ValueError(f"batch_scaling: preset scales training.lr only: drop {', '.join(own)} (lr drives "
                             "the actor, the critic and alpha)")
        return self


class SACLearner(RLlibLearner):
    """RLlib's SAC, or FastSAC (its RLModule and loss with flat numpy replay and batched updates), with its default
    module (a 1-d Box: the numpy export serves its policy network) or, under `training.model`, the portfolio module."""

    # One optimizer each for the actor, the critic(s) and alpha, so a learning rate each (qf_twin_*: twin_q only).
    learner_metrics = ("policy_loss", "qf_loss", "qf_twin_loss", "alpha_loss", "alpha_value", "log_alpha_value",
                       "target_entropy", "logps", "qf_mean", "qf_max", "qf_min", "td_error_mean",
                       "last_target_update_ts", "num_target_updates", "policy_learning_rate", "qf_learning_rate",
                       "qf_twin_learning_rate", "alpha_learning_rate")
    free_result_prefixes = ("replay_buffer/",)
    numpy_layouts = NumpyLayouts(default=(("encoder", "pi"),), box=True, portfolio=True)

    def build(self, inputs: BuildInputs) -> "SACConfig":
        """The SACConfig for one trial, or a whole sweep with Tune domains inside."""
        from ray.rllib.algorithms.sac import SACConfig  # here, not at module load: see DQNLearner.build
        from ray.rllib.core.rl_module.rl_module import RLModuleSpec

        from algos.networks.portfolio_module import with_portfolio_module
        from algos.rllib.config import apply_common
        from algos.sac.catalog import TanhMeanSACCatalog

        training = dict(inputs.sections["training"])
        training.pop("batch_scaling")  # already applied by the platform's hardware plan
        implementation = training.pop("implementation")
        per_call = training.pop("env_steps_per_learner_call")
        model = pop_model_config(training)
        lr = training.pop("lr")  # RLlib's SAC has no single lr: each optimizer gets its own
        rates = {key: lr if training[key] is None else training[key] for key in OWN_LRS}
        replay_config = {"type": REPLAY_BUFFERS[training.pop("replay_buffer_type")],
                         "capacity": training.pop("replay_buffer_capacity")}
        optional = {k: training.pop(k) for k in ("training_intensity", "grad_clip")}
        training.update(rates)
        config = SACConfig()
        if implementation == "fast":
            from algos.sac.fast_sac import FastSACConfig

            config = FastSACConfig().fast(env_steps_per_learner_call=per_call,
                                          update_batch_size=inputs.resources.update_batch_size)
        config.training(replay_buffer_config=replay_config, **training,
                        **{k: v for k, v in optional.items() if v is not None})
        # RLlib's own greedy evaluation (model selection reads it) acts as the scorer and the served model do.
        config = apply_common(config, inputs).rl_module(rl_module_spec=RLModuleSpec(catalog_class=TanhMeanSACCatalog))
        return with_portfolio_module(config, self.portfolio_module(), model, inputs.sections["rl_module"])

    def trainable(self, training: dict[str, Any]) -> Any:
        """What Tune runs: RLlib's registered "SAC", or the FastSAC class."""
        if training["implementation"] == "fast":
            from algos.sac.fast_sac import FastSAC

            return FastSAC
        return "SAC"

    def default_module(self) -> type:
        from ray.rllib.algorithms.sac.torch.default_sac_torch_rl_module import DefaultSACTorchRLModule

        return DefaultSACTorchRLModule

    def portfolio_module(self) -> type:
        from algos.networks.portfolio_module import PortfolioSACModule

        return PortfolioSACModule

    def policy_nets(self, module: Any) -> tuple[Any, dict[str, Any]]:
        """The policy network's encoder and head only (the Q networks never act)."""
        return module.pi_encoder, {"pi": module.pi}


class SAC(Algorithm):
    name = "sac"
    training_section = SACTraining
    greedy = GreedyRule(output="action_dist_inputs", squash=True)  # tanh of the Gaussian's mean, in the Box
    action_spaces = ("box",)
    learner = SACLearner()
    smoke_overrides = ("training.num_steps_sampled_before_learning_starts=100",)
    module_keys = ("fusionnet_hiddens",)  # the fusion net of RLlib's multi-stream Q encoder (Box actions)

    def replay_ratio(self, training: Any, fragment: int, num_envs: int) -> float:
        """The training intensity, or RLlib's native ratio: one batch per sample call."""
        return training.training_intensity or training.train_batch_size_per_learner / (fragment * num_envs)

    def speedup(self, training: Any) -> float:
        """Updates dominate, so it falls with the updates per env step; RLlib's native ratio (no training_intensity:
        one batch per sample call) is as cheap as stock DQN's."""
        if training.training_intensity is None:
            return 1.0
        updates_per_step = training.training_intensity / training.train_batch_size_per_learner
        return min(1.0, SPEEDUP_AT_ONE_UPDATE_PER_STEP[training.implementation] / updates_per_step)

    def splits_batch_unevenly(self, training: Any) -> bool:
        return training.implementation == "fast"  # weighted slices, algos/fast/training_step.py
