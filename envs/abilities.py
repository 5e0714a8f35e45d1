"""What only some env families can do: small typed interfaces a family's class inherits.

The platform asks `isinstance(family, Retrains)` and calls the method; a family without the ability is refused in
one line that says which families have it (`able`). An ability with methods is an abstract class (a family that
forgets one cannot be built); one that only marks what the family's env does (Backtests, TrainsThroughBook) is a
plain mixin. Each ability's methods import the family's own modules inside
their bodies, so reading the table stays cheap. Which family has which: docs/DESIGN.md, "Env families".
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Callable

from envs.report import Policy

if TYPE_CHECKING:

    from envs.ability_types import DataCommand, DataFiles, NumericProbe, PaperMarket
    from envs.retrain_data import RetrainData


class Backtests:
    """Walk-forward folds and a verdict: the env takes env_config `protocol` and `fold` (envs.splits), tells its parts'
    periods with `split_periods()`, and its reports carry per-period returns and periods_per_year."""

    # env_config keys that cut the data themselves and mean nothing once a protocol does: a file that sets one next
    # to evaluation.protocol is refused, not silently ignored.
    unused_with_protocol: tuple[str, ...] = ()


class CachesFeatures(ABC):
    """Computed features are cached by content in the run's feature store and shared by every trial."""

    @property
    @abstractmethod
    def store_key(self) -> str:
        """The env_config key that receives the run's feature store (its storage root + features/)."""

    def attach_store(self, env_config: dict[str, Any], uri: str) -> dict[str, Any]:
        """A new env_config with the run's feature store, unless the file names one."""
        if env_config.get(self.store_key):
            return dict(env_config)
        return {**env_config, self.store_key: uri}


class HasBars(ABC):
    """Its data are bars of one interval; hardware presets size batches by it."""

    @property
    @abstractmethod
    def timeframe_key(self) -> str:
        """The env_config key of the bar interval (e.g. "1h")."""

    def timeframe(self, env_config: dict[str, Any]) -> str | None:
        return env_config.get(self.timeframe_key)


class PreparesData(ABC):
    """Makes the data a run needs local before Ray starts (a cache fetched from an exchange, say)."""

    @abstractmethod
    def prepare_data(self, env_config: dict[str, Any], searched: dict[str, list[Any]], fetch: bool,
                     log: Callable[[str], None]) -> list[str]:
        """What is still missing after making `env_config`'s data (and every searched value's) local."""


class ExplainsInputs(ABC):
    """Says which inputs matter: each feature's importance on the validation part."""

    @abstractmethod
    def importance(self, policy: Policy, env_config: dict[str, Any]) -> Any:
        """A DataFrame of each feature's importance (its return's drop when the feature is permuted)."""


class ScoresValidation(ABC):
    """Scores the greedy policy on the validation part as its final table scores the test part; merged into RLlib's
    evaluation results as evaluation/validation/<key>, so tune.metric can select on it."""

    validation_keys: tuple[str, ...] = ()

    @abstractmethod
    def validation_scores(self, policy: Policy, env_config: dict[str, Any]) -> dict[str, float]:
        """The keys of `validation_keys` and their values on the validation part."""


class ServesRawInputs(ABC):
    """A served model takes the family's raw inputs (the last bars, a cycle's table), not observations."""

    @abstractmethod
    def reader_class(self) -> Any:
        """The class that turns raw inputs into the env's observation: `for_env_config(env_config)`, `save`/`load`,
        `accepts(frame)`, `decide(frame, policy)`."""


class PaperTrades(ServesRawInputs):
    """`experiments.paper` replays its registered models bar by bar on bars files, through its book."""

    @abstractmethod
    def paper_market(self) -> type[PaperMarket]:
        """The market class (envs.trading.paper.SpotPaper, envs.portfolio.paper.UniversePaper)."""


class Transfers(ABC):
    """A registered model is scored on data it never trained on, zero-shot and with online learners."""

    @abstractmethod
    def transfer(self, policy: Policy, reader: Any, data_path: str, learners: Any) -> Any:
        """A report (`.table`, `.per_cycle`, `.notes`) of `policy` on `data_path`."""


class TrainsThroughBook:
    """Its book is differentiable: the direct learner (algos/direct/) trains through a torch copy of it. The torch
    problem lives in algos/ (envs import no torch), found there by the family's class."""


def able(ability: type, families: Any) -> list[str]:
    """The ids of the families that have `ability`, for a refusal that says where it works."""
    return [family.env_id for family in families if isinstance(family, ability)]


class UpdatesData(ABC):
    """`python -m experiments.data` works on its data files: the family brings the subcommands (their flags and
    typed requests) and does each; a new version of a file is written through the platform's `DataFiles` (whole,
    the previous one kept beside it, local or s3://). Families of one `data_kind` share the command."""

    data_kind: str = ""

    @abstractmethod
    def data_commands(self) -> tuple[DataCommand, ...]:
        """Its subcommands of `python -m experiments.data`."""

    @abstractmethod
    def run_data(self, request: Any, files: DataFiles) -> list[str]:
        """Do one request (made by one of `data_commands`); the lines that say what was read and written."""

    @abstractmethod
    def data_files(self, env_config: dict[str, Any], source: str) -> list[str]:
        """The files `env_config` reads that an update extends (a universe: each asset's file); InputError naming
        `source` when it reads none (generated data, say)."""

    @abstractmethod
    def update_request(self, paths: Sequence[str], feed: str) -> Any:
        """The request that appends to each of `paths` what `feed` (an exchange, say) has after the file's last
        record (paper trading's --exchange polls this)."""


class ProbesNumerics(ABC):
    """`python -m experiments.cross_cpu` digests its probe: two machines whose digests match compute its inputs
    the same way (the network trained on them is the platform's, experiments/plan/numerics.py)."""

    @abstractmethod
    def numeric_probe(self) -> NumericProbe:
        """Its features of its bundled data, computed as a run computes them."""


class Retrains(ABC):
    """`python -m experiments.retrain` works for it: a challenger trained on the data before the newest bars,
    forward-tested against the champion on them, a gate, and a refit through the newest bar. The retrain's steps are
    the platform's (experiments/api/retraining.py); what its data is, how it is cut and how a model is replayed on it
    are the family's (envs.retrain_data.RetrainData)."""

    @abstractmethod
    def retrain_data(self, env_config: dict[str, Any], source: str) -> RetrainData:
        """The data `env_config` names, read now (its newest bars included); InputError naming `source` and the key
        when it cannot be retrained on (no file to append to, say)."""
