"""The same file samples the same sweep: `experiments.sweep.tuner`'s searcher, seeded from the file
(`tune.search_seed`), draws each point once for every seed (constant over the seed grid) and draws the same points
again; another seed draws others. Asked as Tune's loop asks it, without a Ray (tests/integration/test_selection.py
runs the sweep through Tune and gets these same trials)."""
from __future__ import annotations

from tests.sampling import SEARCHED, sampled


def test_same_file_samples_the_same_sweep(tmp_path):
    first = sampled(SEARCHED, tmp_path)
    assert first == sampled(SEARCHED, tmp_path) and len(first) == 4
    lrs = {lr for lr, _ in first}
    assert len(lrs) == 2  # two sampled points ...
    for lr in lrs:  # ... each repeated on both seeds (constant over the seed grid)
        assert sorted(seed for value, seed in first if value == lr) == [0, 1]
    assert {lr for lr, _ in sampled([*SEARCHED, "tune.search_seed=1"], tmp_path)}.isdisjoint(lrs)
