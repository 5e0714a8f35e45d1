"""DQN: double-Q, dueling, n-step, prioritized replay; `training.implementation: fast` (the default) runs
`algos.dqn.fast_dqn.FastDQN`, `rllib` runs RLlib's DQN as shipped.

The table entry (`DQN`) and its learner (`DQNLearner`, an RLlib learner). The `training` section (`DQNTraining`)
mirrors `DQNConfig.training`, so building the config is a translation of plain values (`algos.inputs.BuildInputs`);
search-space domains are already in place in those values, so Tune resolves them per trial.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from algos.base import Algorithm, NumpyLayouts
from algos.export.torch_layers import not_exportable
from algos.greedy import GreedyRule
from algos.inputs import BuildInputs, TrainingBase
from algos.rllib.learner import RLlibLearner
from envs.validation import StrictModel

if TYPE_CHECKING:
    from ray.rllib.algorithms.dqn import DQNConfig

REPLAY_BUFFERS = {"prioritized": "PrioritizedEpisodeReplayBuffer", "uniform": "EpisodeReplayBuffer"}
# Env steps/s of each training implementation relative to stock RLlib DQN, which hardware presets declare: time
# estimates multiply the preset's rate by it. Raise "fast" if estimates run long (measurements: docs/benchmarks.md).
IMPLEMENTATION_SPEEDUP = {"rllib": 1.0, "fast": 10.0}


class ReplayBufferSection(StrictModel):
    """Proportional prioritized replay (alpha: how strongly priorities skew the draw; beta: the importance
    correction, annealed linearly from `beta` to `beta_final` over `beta_annealing_steps` sampled env
    steps) or uniform. Stock RLlib (implementation: rllib) keeps beta fixed."""

    type: Literal["prioritized", "uniform"] = Field(
        default="prioritized",
        description="prioritized replays surprising transitions (large TD error) more often; uniform draws every "
                    "stored transition alike.")
    capacity: int = Field(default=50_000, ge=100,
                          description="Transitions the buffer holds; the oldest are dropped first. Larger remembers "
                                      "older experience at more memory.")
    alpha: float = Field(default=0.6, ge=0,
                         description="prioritized: how strongly priorities skew the draw (0: uniform).")
    beta: float = Field(default=0.4, ge=0, le=1,
                        description="prioritized: the importance-sampling correction at the start (1: full "
                                    "correction); stock RLlib keeps it fixed.")
    beta_final: float = Field(default=1.0, ge=0, le=1,
                              description="prioritized, implementation fast: the correction beta anneals to.")
    beta_annealing_steps: int = Field(
        default=100_000, ge=1,
        description="prioritized, implementation fast: sampled env steps over which beta anneals linearly to "
                    "beta_final.")


class DQNTraining(TrainingBase):
    implementation: Literal["fast", "rllib"] = Field(
        default="fast",
        description="fast: algos.dqn.fast_dqn.FastDQN, RLlib's DQN RLModule and loss with flat numpy replay and many "
                    "minibatch updates per learner call (docs/benchmarks.md); rllib: RLlib's DQN as shipped.")
    env_steps_per_learner_call: int = Field(
        default=256, ge=1,
        description="implementation fast only: env steps sampled before each learner call, which then runs all the "
                    "minibatch updates they owe; larger amortizes the call, with priorities refreshed less often.")
    double_q: bool = Field(default=True, description="Double Q-learning: the online network picks the next action, "
                                                     "the target network values it, which curbs overestimation.")
    dueling: bool = Field(default=True, description="Dueling heads: Q is a state value plus per-action advantages.")
    n_step: int = Field(default=3, ge=1,
                        description="Rewards summed before bootstrapping from Q: longer propagates rewards faster, "
                                    "with more variance.")
    target_network_update_freq: int = Field(
        default=2000, ge=1,
        description="Env steps between two copies of the online network into the target network; longer is "
                    "steadier, slower to follow.")
    epsilon: list[tuple[Annotated[int, Field(ge=0)], Annotated[float, Field(ge=0, le=1)]]] = Field(
        default_factory=lambda: [(0, 1.0), (20_000, 0.05)],
        description="The exploration schedule, piecewise linear: [[env step, epsilon], ...]; epsilon is the chance "
                    "of a random action, and the last point is where exploration has decayed.")
    replay_buffer: ReplayBufferSection = Field(
        default_factory=ReplayBufferSection, description="The replay buffer: prioritized or uniform, and its size.")
    training_intensity: float | None = Field(
        default=None, gt=0,
        description="Replayed samples per sampled env step (the replay ratio); None keeps RLlib's native ratio, one "
                    "batch per sample call.")
    num_steps_sampled_before_learning_starts: int = Field(
        default=1000, ge=0,
        description="Env steps sampled before the first update, to fill the replay buffer first.")


def _as_lists(value: Any) -> Any:
    """RLlib wants the schedule as lists; a search placeholder (a Tune domain) passes through."""
    return [list(point) for point in value] if isinstance(value, (list, tuple)) else value


class DQNLearner(RLlibLearner):
    """RLlib's DQN, or FastDQN (its RLModule and loss with flat numpy replay and batched updates), which trains
    RLlib's DQN module too: numpy serves the argmax of its Q-values, as forward_inference acts."""

    learner_metrics = ("qf_loss", "qf_mean", "qf_max", "qf_min", "td_error_mean", "last_target_update_ts",
                       "num_target_updates")
    free_result_prefixes = ("replay_buffer/",)
    numpy_layouts = NumpyLayouts(default=(("af", "encoder", "vf"), ("encoder", "q")))

    def build(self, inputs: BuildInputs) -> "DQNConfig":
        """The DQNConfig (FastDQNConfig for implementation: fast) for one trial, or a whole sweep with domains
        inside."""
        # Ray is imported here, not at module load: validating an experiment file reads the table and the training
        # section, and must not pay RLlib's import (~3.7 s here, torch included) when it refuses the file.
        from ray.rllib.algorithms.dqn import DQNConfig

        from algos.rllib.config import apply_common

        training = dict(inputs.sections["training"])
        implementation = training.pop("implementation")
        replay = training.pop("replay_buffer")
        replay_config: dict[str, Any] = {"type": REPLAY_BUFFERS[replay["type"]], "capacity": replay["capacity"]}
        if replay["type"] == "prioritized":
            replay_config.update(alpha=replay["alpha"], beta=replay["beta"])
            if implementation == "fast":  # FastDQN anneals beta; RLlib's buffer keeps it fixed
                replay_config.update(beta_final=replay["beta_final"],
                                     beta_annealing_steps=replay["beta_annealing_steps"])
        training["epsilon"] = _as_lists(training["epsilon"])
        training.pop("batch_scaling")  # already applied by the platform's hardware plan
        optional = {k: training.pop(k) for k in ("training_intensity", "grad_clip")}
        per_call = training.pop("env_steps_per_learner_call")
        config = DQNConfig()
        if implementation == "fast":
            from algos.dqn.fast_dqn import FastDQNConfig

            config = FastDQNConfig().fast(env_steps_per_learner_call=per_call,
                                          mixed_precision=inputs.resources.mixed_precision,
                                          update_batch_size=inputs.resources.update_batch_size)
        config.training(replay_buffer_config=replay_config, **training,
                        **{k: v for k, v in optional.items() if v is not None})
        return apply_common(config, inputs)

    def trainable(self, training: dict[str, Any]) -> Any:
        """What Tune runs: RLlib's registered "DQN", or the FastDQN class."""
        if training["implementation"] == "fast":
            from algos.dqn.fast_dqn import FastDQN

            return FastDQN
        return "DQN"

    def default_module(self) -> type:
        from ray.rllib.algorithms.dqn.torch.default_dqn_torch_rl_module import DefaultDQNTorchRLModule

        return DefaultDQNTorchRLModule

    def policy_nets(self, module: Any) -> tuple[Any, dict[str, Any]]:
        """The encoder, then the dueling streams (af: advantages, vf: the value) or the one Q head (RLlib's `af`,
        exported as q). A distributional DQN's head gives atoms, not the Q-values numpy takes the argmax of:
        refused."""
        if module.num_atoms != 1:
            raise not_exportable(f"distributional DQN (num_atoms={module.num_atoms})")
        return module.encoder, ({"af": module.af, "vf": module.vf} if module.uses_dueling else {"q": module.af})


class DQN(Algorithm):
    name = "dqn"
    training_section = DQNTraining
    greedy = GreedyRule(output="actions")  # DQN's forward_inference already takes the argmax of Q
    action_spaces = ("discrete",)
    learner = DQNLearner()
    smoke_overrides = ("training.num_steps_sampled_before_learning_starts=100",)

    def speedup(self, training: Any) -> float:
        return IMPLEMENTATION_SPEEDUP[training.implementation]

    def mixed_precision(self, training: Any) -> bool:
        return training.implementation == "fast"  # autocast in the FastDQN learner

    def splits_batch_unevenly(self, training: Any) -> bool:
        return training.implementation == "fast"  # weighted slices, algos/dqn/fast_learner.py

    def exploration_steps(self, training: Any) -> int:
        return int(max(step for step, _ in training.epsilon))

    def replay_ratio(self, training: Any, fragment: int, num_envs: int) -> float:
        """The training intensity, or RLlib's native ratio: one batch per sample call."""
        return training.training_intensity or training.train_batch_size_per_learner / (fragment * num_envs)
