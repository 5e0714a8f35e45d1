"""The cross-CPU fingerprint digests what the env families compute (envs.abilities.ProbesNumerics), not a
family's data the platform reads itself."""
from __future__ import annotations

import hashlib

import numpy as np

import envs
from envs.abilities import ProbesNumerics
from envs.ability_types import NumericProbe
from envs.families import GymFamily
from experiments.plan import numerics


class Probing(GymFamily, ProbesNumerics):
    def numeric_probe(self) -> NumericProbe:
        features = np.arange(40.0).reshape(10, 4) / 40
        return NumericProbe(features, 2, np.linspace(-0.01, 0.01, 9))


def test_the_fingerprint_digests_every_probing_familys_features(monkeypatch):
    probe = Probing("Probe-v0").numeric_probe()
    monkeypatch.setattr(envs, "FAMILIES", (Probing("Probe-v0"),))
    digests = numerics.fingerprint(updates=2)
    assert digests["features"] == hashlib.sha256(probe.features.tobytes()).hexdigest()[:16]
    assert set(digests) == {"numpy", "features", "network"}


def test_the_spot_family_probes_the_features_of_the_bundled_bars():
    [probing] = [family for family in envs.FAMILIES if isinstance(family, ProbesNumerics)]
    probe = probing.numeric_probe()
    assert probe.features.shape[0] == len(probe.series) + 1 and 0 < probe.warmup < 500
    assert np.isfinite(probe.features[probe.warmup:]).all()
