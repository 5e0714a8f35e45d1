"""SAC's greedy action as SAC defines it, in RLlib's own evaluation too: tanh of the Gaussian's mean.

RLlib's squashed Gaussian acts, when not exploring, with its *pre-tanh* mean, which the env runner then clips into
the Box: a different policy from the one SAC trained (tanh of a Gaussian sample) and from the one the scorer and the
served model run (`algos.greedy.GreedyRule(squash=True)`: tanh of the mean, rescaled to the Box). Model selection
reads RLlib's evaluation, so without this the checkpoint chosen on validation would be judged on test by another
policy. Imported by `SACLearner.build` (algos/sac/algorithm.py) only: it imports Ray and torch.
"""
from __future__ import annotations

from ray.rllib.algorithms.sac.sac_catalog import SACCatalog
from ray.rllib.core.distribution.torch.torch_distribution import TorchDeterministic, TorchSquashedGaussian


class TanhMeanSquashedGaussian(TorchSquashedGaussian):
    """RLlib's squashed Gaussian whose deterministic action is the squashed mean (in [-1, 1]; the env runner
    rescales it to the Box as it rescales every SAC action)."""

    def to_deterministic(self) -> TorchDeterministic:
        return TorchDeterministic(loc=self._squash(self.loc))


class TanhMeanSACCatalog(SACCatalog):
    """SAC's catalog with the squashed Gaussian above for Box actions (discrete SAC keeps RLlib's categorical)."""

    def get_action_dist_cls(self, framework: str):
        cls = super().get_action_dist_cls(framework)
        return TanhMeanSquashedGaussian if cls is TorchSquashedGaussian else cls
