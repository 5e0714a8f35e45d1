"""The `ensemble:` section: an ensemble of one member, and one over configurations that read different inputs, are
refused by the dry run in one line (exit 2, nothing written); a smoke test of an ensemble keeps two seeds."""
from __future__ import annotations

import pytest

from envs.errors import InputError
from experiments.api.preflight import load
from experiments.config.ensemble import planned_members
from experiments.run import main
from tests.conftest import REPO

CONF = REPO / "conf" / "ppo_portfolio_crypto.yaml"  # 2 seeds, 3 walk-forward folds


def _file(tmp_path, text: str):
    path = tmp_path / "ensemble.yaml"
    path.write_text(f"extends: {CONF}\n{text}")
    return path


@pytest.mark.parametrize("settings, text, fragment", [
    (["ensemble.over=seeds", "tune.seeds=[3]"], "",
     "ensemble.over: seeds: an ensemble of one member (tune.seeds [3]) is that member: list two or more seeds"),
    (["ensemble.over=configurations", "tune.seeds=[0]"], "",
     "ensemble.over: configurations: an ensemble of one member (tune.seeds [0], one configuration) is that member"),
    (["ensemble.over=configurations"],
     "tune:\n  search_space:\n    environment.env_config.window: {grid: [12, 24]}\n",
     "ensemble.over: configurations: tune.search_space searches environment.env_config.window, so the members would "
     "read different inputs"),
])
def test_the_dry_run_refuses_an_ensemble_of_one_member_or_of_different_inputs_in_one_line(
        tmp_path, capsys, settings, text, fragment):
    out = tmp_path / "out"
    conf = _file(tmp_path, text) if text else CONF
    code = main([str(conf), "--dry-run", "--output", str(out), *(arg for s in settings for arg in ("--set", s))])
    stderr = capsys.readouterr().err.strip()
    assert code == 2 and fragment in stderr, stderr
    assert "\n" not in stderr and "Traceback" not in stderr
    assert not out.exists()


def test_members_count_seeds_or_every_configuration_times_the_seeds(tmp_path):
    searched = _file(tmp_path, "tune:\n  seeds: [0]\n  num_samples: 2\n  search_space:\n"
                               "    training.lr: {grid: [0.0001, 0.0003, 0.001]}\n")
    assert planned_members(load(CONF, ["ensemble.over=seeds"], smoke_test=False)) == 2
    assert planned_members(load(searched, ["ensemble.over=configurations"], smoke_test=False)) == 6
    # over seeds, the same file is one member: refused (the test above), while over configurations it is six
    with pytest.raises(InputError, match="an ensemble of one member"):
        load(searched, ["ensemble.over=seeds"], smoke_test=False)


def test_a_smoke_test_of_an_ensemble_keeps_two_seeds_so_it_has_an_ensemble_to_make():
    assert load(CONF, [], smoke_test=True).tune.seeds == [0]
    smoke = load(CONF, ["ensemble.over=seeds"], smoke_test=True)
    assert smoke.tune.seeds == [0, 1] and smoke.ensemble.over == "seeds"
