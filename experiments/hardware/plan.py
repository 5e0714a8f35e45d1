"""From a preset to RLlib resources, Tune concurrency, a time/cost estimate and a cluster check.

The four strategies are the multi-GPU strategies of docs/hardware.md in RLlib terms:
`cpu` (no GPU anywhere), `shared_gpu` (several trials on one GPU via fractional GPUs),
`trial_per_gpu` (one trial, e.g. one coin or one agent, per GPU) and `multi_gpu_learners`
(one trial data-parallel across all GPUs, `num_learners` = GPU count).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace

from envs.errors import InputError
from experiments.hardware.batch import BatchPlan, example_batch, plan_batch
from experiments.hardware.presets import HardwarePreset, cpus_per_trial, learner_count

# One CPU per remote learner: RLlib's "auto" would give GPU learners 0, leaving nothing to feed them.
CPUS_PER_LEARNER = 1
# Ray keeps resource amounts to 4 decimals; rounding a share up (1/7 -> 0.1429) would fit only 6 on a GPU.
_RAY_RESOLUTION = 10_000


@dataclass(frozen=True)
class ResourcePlan:
    """What one trial gets and how many run at once; the run pipeline copies these into RLlib/Tune."""

    preset: str
    strategy: str
    gpu_model: str | None
    gpu_count: int
    vram_gb: float | None
    timeframe: str | None
    num_learners: int
    num_gpus_per_learner: float
    num_cpus_per_learner: int
    num_env_runners: int
    num_envs_per_env_runner: int
    num_cpus_per_env_runner: float
    train_batch_size_per_learner: int  # the largest slice of the update's batch (experiments/hardware/batch.py)
    update_batch: int  # the whole batch of one update, over all learners
    lr_scale: float  # 1 unless the experiment opted in to the preset's large_batch and its lr rule
    lr_rule: str | None
    experiment_batch: int
    mixed_precision: str
    torch_compile_learner: bool
    max_concurrent_trials: int
    gpus_per_trial: float
    cpus_per_trial: float

    @property
    def batch_plan(self) -> BatchPlan:
        learners = max(self.num_learners, 1)
        return BatchPlan(self.experiment_batch, self.update_batch, learners,
                         self.lr_scale, self.lr_rule)

    def with_concurrency(self, trials: int) -> "ResourcePlan":
        """This plan running at most `trials` trials at once (an experiment's `tune.max_concurrent_trials`)."""
        return replace(self, max_concurrent_trials=trials)

    def as_params(self) -> dict[str, str | int | float]:
        """Flat `hardware/<field>` params for MLflow (None becomes "none": MLflow params are strings)."""
        return {f"hardware/{k}": ("none" if v is None else v) for k, v in asdict(self).items()}

    def describe(self) -> str:
        """One line in the style of the classic GPU-profile log line:
        "Using profile 'NVIDIA RTX 4090' (24GB VRAM): ..."."""
        if self.gpu_model is None:
            head = f"Using profile '{self.preset}' (CPU only)"
        else:
            count = f"{self.gpu_count}x " if self.gpu_count > 1 else ""
            head = f"Using profile '{self.gpu_model}' ({count}{self.vram_gb:g}GB VRAM)"
        if self.num_learners > 1 and self.update_batch % self.num_learners:
            split = f" over {self.num_learners} learners ({', '.join(map(str, self.batch_plan.slices))})"
            batch = f"batch {self.update_batch}{split}"
        else:
            batch = f"batch {self.train_batch_size_per_learner}" + (
                f" per learner x {self.num_learners}" if self.num_learners > 1 else "")
        batch += f" ({self.timeframe})" if self.timeframe else ""
        knobs = "".join([f", mixed precision {self.mixed_precision}" if self.mixed_precision != "none" else "",
                         ", torch.compile learner" if self.torch_compile_learner else ""])
        if self.num_env_runners:
            runners = f"{self.num_env_runners} env runners x {self.num_envs_per_env_runner} envs"
        else:
            runners = f"{self.num_envs_per_env_runner} envs in the trial process"
        per_trial = f"{self.cpus_per_trial:g} CPU" + (
            f" + {self.gpus_per_trial:.4g} GPU" if self.gpus_per_trial else ""
        )
        return (
            f"{head}: preset {self.preset}, {self.strategy}, {self.max_concurrent_trials} trial(s) at once, "
            f"{per_trial} per trial, {_learners_text(self)}, {batch}, {runners}{knobs}"
        )


def _learners_text(plan: ResourcePlan) -> str:
    if plan.num_learners > 0:
        return f"{plan.num_learners} learners x {plan.num_gpus_per_learner:g} GPU"
    if plan.num_gpus_per_learner > 0:
        return f"local learner on {plan.num_gpus_per_learner:.4g} GPU"
    return "local learner on CPU"


def trials_at_once(preset: HardwarePreset) -> int:
    """How many trials the preset runs concurrently, limited by its GPUs and its CPUs."""
    by_gpu = {
        "cpu": preset.cpus,
        "shared_gpu": preset.gpu_count * preset.trials_per_gpu,
        "trial_per_gpu": preset.gpu_count,
        "multi_gpu_learners": 1,
    }[preset.strategy]
    by_cpu = int(preset.cpus // cpus_per_trial(preset))
    return max(1, min(by_gpu, by_cpu))


def idle_cpus(plan: "ResourcePlan", preset: HardwarePreset, num_trials: int) -> str | None:
    """Why a plan leaves some of the preset's CPUs unused (a preset that declares 16 CPUs and plans 6 says so)."""
    used = plan.cpus_per_trial * plan.max_concurrent_trials
    if used >= preset.cpus:
        return None
    at_once = trials_at_once(preset)
    if plan.max_concurrent_trials < min(at_once, num_trials):
        why = "the experiment's tune.max_concurrent_trials caps it"
    elif num_trials < at_once:
        why = f"the experiment has {num_trials} trial(s)"
    elif preset.strategy == "multi_gpu_learners":
        why = "one trial holds all the GPUs"
    else:
        why = (f"the GPUs take {at_once} at once ({preset.gpu_count} GPU(s) x trials_per_gpu "
               f"{preset.trials_per_gpu if preset.strategy == 'shared_gpu' else 1})")
    return (f"uses {used:g} of the preset's {preset.cpus} CPUs: {plan.max_concurrent_trials} trial(s) at once x "
            f"{plan.cpus_per_trial:g} CPU, because {why}; the rest are left to the driver, data and scoring "
            "(a larger env_runners_per_trial in the preset gives each trial more)")


def gpus_per_learner(preset: HardwarePreset) -> float:
    """A fraction for shared GPUs (Ray schedules it, it does not cap memory), else a whole GPU or none."""
    if preset.strategy == "cpu":
        return 0.0
    if preset.strategy == "shared_gpu":
        return math.floor(_RAY_RESOLUTION / preset.trials_per_gpu) / _RAY_RESOLUTION
    return 1.0


def resolve_plan(preset: HardwarePreset, timeframe: str | None, num_trials: int, batch: int | None = None,
                 batch_scaling: str = "none") -> ResourcePlan:
    """Turn a preset into per-trial RLlib resources and a Tune concurrency for `num_trials` trials, for an
    experiment whose update batch is `batch` (its `training.train_batch_size_per_learner`; None: the
    default batch, rounded up to split over the preset's learners)."""
    if num_trials < 1:
        raise InputError(
            f"number of trials must be >= 1, got {num_trials}: check the search space and num_samples"
        )
    learners = learner_count(preset)
    per_learner = gpus_per_learner(preset)
    batch = example_batch(preset) if batch is None else batch
    batch_plan = plan_batch(preset, timeframe, batch, batch_scaling)
    return ResourcePlan(
        preset=preset.name,
        strategy=preset.strategy,
        gpu_model=preset.gpu_model,
        gpu_count=preset.gpu_count,
        vram_gb=preset.vram_gb,
        timeframe=timeframe,
        num_learners=learners,
        num_gpus_per_learner=per_learner,
        num_cpus_per_learner=CPUS_PER_LEARNER,
        num_env_runners=preset.env_runners_per_trial,
        num_envs_per_env_runner=preset.envs_per_env_runner,
        num_cpus_per_env_runner=preset.cpus_per_env_runner,
        train_batch_size_per_learner=batch_plan.per_learner,
        update_batch=batch_plan.batch,
        lr_scale=batch_plan.lr_scale,
        lr_rule=batch_plan.lr_rule,
        experiment_batch=batch,
        mixed_precision=preset.mixed_precision,
        torch_compile_learner=preset.torch_compile_learner,
        max_concurrent_trials=min(trials_at_once(preset), num_trials),
        gpus_per_trial=per_learner * max(learners, 1),
        cpus_per_trial=cpus_per_trial(preset),
    )


# What a run spends besides env steps, measured on the cpu preset (2 cores, conf/dqn_btc.yaml, docs/hardware.md):
# each wave of trials waits ~6 s for its trial actors to start, build RLlib and write the last checkpoint, and a
# run spends ~35 s starting Ray, reading data and features, and scoring (backtests, importance, registration).
TRIAL_START_S = 6.0
RUN_START_S = 35.0


@dataclass
class PlanEstimate:
    """Wall-clock and cost of a sweep from the preset's declared throughput (a budget, not a promise)."""

    trials: int
    trials_at_once: int
    waves: int
    env_steps_per_trial: int
    hours: float  # everything: training, trial starts, the run's start and its scoring
    cost_usd: float | None
    training_hours: float = 0.0  # env steps at the preset's rate alone

    def describe(self) -> str:
        """'8 trials, 4 at once -> 2 waves x 100000 env steps: 1.2 h (training 1.1 h + starts and scoring), $14.70'."""
        cost = (
            f"${self.cost_usd:,.2f}" if self.cost_usd is not None else "cost unknown (no price in the preset)"
        )
        return (
            f"{self.trials} trials, {self.trials_at_once} at once -> {self.waves} wave(s) x "
            f"{self.env_steps_per_trial} env steps: {self.short()} (training {duration(self.training_hours * 3600)} "
            f"+ {self.waves} trial start(s) x {TRIAL_START_S:g} s + {RUN_START_S:g} s to start and score), {cost}"
        )

    def short(self) -> str:
        return duration(self.hours * 3600)


def duration(seconds: float) -> str:
    """'45 s', '3.2 min', '1.25 h': a plan's and a run's times, in the unit a person reads them in."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 5400 else f"{seconds / 3600:.2f} h"


def estimate(
    plan: ResourcePlan, preset: HardwarePreset, num_trials: int, env_steps_per_trial: int, speedup: float = 1.0
) -> PlanEstimate:
    """Waves of concurrent trials times the time one trial needs at the preset's env steps per second
    (declared for stock RLlib DQN; `speedup` scales it for a faster training implementation)."""
    if num_trials < 1 or env_steps_per_trial < 1:
        raise InputError(
            f"estimate needs >= 1 trial and >= 1 env step per trial, "
            f"got {num_trials} and {env_steps_per_trial}"
        )
    waves = math.ceil(num_trials / plan.max_concurrent_trials)
    training = waves * env_steps_per_trial / (preset.env_steps_per_second * speedup) / 3600
    hours = training + (waves * TRIAL_START_S + RUN_START_S) / 3600
    cost = hours * preset.price_per_hour_usd if preset.price_per_hour_usd is not None else None
    return PlanEstimate(num_trials, plan.max_concurrent_trials, waves, env_steps_per_trial, hours, cost, training)


def check_cluster(plan: ResourcePlan, cluster_resources: Mapping[str, float],
                  trial_resources: Mapping[str, float] | None = None) -> None:
    """Fail fast when one trial cannot fit in the Ray cluster (Tune would leave it PENDING forever), also
    for the custom resources an experiment pins its trials with (tune.trial_resources)."""
    for name, amount in (trial_resources or {}).items():
        if float(cluster_resources.get(name, 0.0)) + 1e-9 < amount:
            declared = sorted(k for k in cluster_resources if k not in ("CPU", "GPU", "memory", "object_store_memory")
                              and not k.startswith("node:") and not k.startswith("accelerator_type:"))
            raise InputError(
                f"tune.trial_resources.{name}: each trial asks for {amount:g}, the Ray cluster declares "
                f"{float(cluster_resources.get(name, 0.0)):g} (custom resources: {', '.join(declared) or 'none'}): "
                f"start the nodes meant for trials with ray start --resources '{{\"{name}\": N}}', or remove it"
            )
    gpus = float(cluster_resources.get("GPU", 0.0))
    cpus = float(cluster_resources.get("CPU", 0.0))
    if plan.gpus_per_trial > gpus + 1e-9:
        raise InputError(
            f"preset {plan.preset} needs {plan.gpus_per_trial:.4g} GPU per trial, "
            f"the Ray cluster has {gpus:g} GPUs: pick --hardware cpu or start Ray on a GPU machine"
        )
    if plan.cpus_per_trial > cpus + 1e-9:
        raise InputError(
            f"preset {plan.preset} needs {plan.cpus_per_trial:g} CPUs per trial, "
            f"the Ray cluster has {cpus:g} CPUs: pick a preset with fewer env_runners_per_trial "
            f"or start Ray with more CPUs"
        )


def check_live_cluster(plan: ResourcePlan, trial_resources: Mapping[str, float] | None = None) -> None:
    """`check_cluster` against the running Ray cluster; Ray is imported only here to keep dry runs fast."""
    import ray

    if not ray.is_initialized():
        raise RuntimeError("check_live_cluster needs ray.init() first")
    check_cluster(plan, ray.cluster_resources(), trial_resources)
