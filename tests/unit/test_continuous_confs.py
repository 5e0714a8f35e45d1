"""conf/sac_btc.yaml: a delta of the main job that switches the algorithm to SAC and the positions to a sized
exposure; what belonged to DQN goes with its training section, and DQN itself is refused on such positions."""
from __future__ import annotations

import subprocess
import sys

from experiments.config.load import load_experiment
from tests.conftest import REPO

SAC_BTC = REPO / "conf" / "sac_btc.yaml"


def test_sac_btc_is_dqn_btc_with_sac_sizing_positions():
    sac, dqn = load_experiment(SAC_BTC), load_experiment(REPO / "conf" / "dqn_btc.yaml")
    assert sac.algorithm == "sac" and sac.environment.env_config["positions"] == "continuous"
    assert sac.evaluation.protocol == dqn.evaluation.protocol and sac.tune.seeds == dqn.tune.seeds
    assert sac.environment.env_config["data_path"] == dqn.environment.env_config["data_path"]
    # DQN's search and its warm-start epsilon are DQN's keys: dropped with its training section.
    assert "training.n_step" not in sac.tune.search_space
    assert sac.retrain.incremental.settings == {} and dqn.retrain.incremental.settings


def test_dqn_on_sized_positions_is_refused_before_ray_naming_the_algorithms_that_fit():
    result = subprocess.run([sys.executable, "-m", "experiments.run", str(SAC_BTC), "--dry-run", "--set",
                             "algorithm=dqn"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert result.returncode == 2, result.stderr
    error = result.stderr.strip()
    assert len(error.splitlines()) == 1 and "Traceback" not in error
    assert "algorithm dqn acts in discrete spaces only: use algorithm: ppo or sac" in error
