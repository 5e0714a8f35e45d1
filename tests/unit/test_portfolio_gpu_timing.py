"""`experiments.studies.portfolio_gpu_timing` times, in one run and in turn, a PPO minibatch update and the direct
learner's own update (PortfolioProblem.step, backward, Adam) on the same per-asset net, and prints their ratio. Tiny
sizes; no time is asserted."""
from __future__ import annotations

import re

from experiments.studies import portfolio_gpu_timing as study


def test_one_run_times_both_updates_and_prints_their_ratio(capsys):
    assert study.main(["--device", "cpu", "--assets", "3", "--batch", "8", "--direct-batch", "4", "--repeats", "2",
                       "--hiddens", "8"]) == 0
    out = capsys.readouterr().out
    assert "N = 3, row 122, hiddens [8]" in out
    rows = re.findall(r"^\| (PPO minibatch|direct mini-batch) \| (\d+) \| [\d.]+ \|", out, re.MULTILINE)
    assert rows == [("PPO minibatch", "8"), ("direct mini-batch", "4")]
    (ratio,) = re.findall(r"^direct / PPO: ([\d.]+) \(median direct mini-batch of 4 decisions over median PPO "
                          r"minibatch of 8 observations, 2 alternating repeats\)", out, re.MULTILINE)
    assert float(ratio) > 0
