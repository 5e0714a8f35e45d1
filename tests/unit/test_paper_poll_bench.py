"""`python -m experiments.benchmark paper_poll --quick`: both layouts polled and re-read whole on the same files give
the same universe, and the JSON has every row."""
from __future__ import annotations

import json

from experiments.benchmark.__main__ import main


def test_paper_poll_quick_gives_the_whole_reads_universe_and_every_row(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["paper_poll", "--quick", "--output", "out"]) == 0  # a universe that differs fails the run
    document = json.loads((tmp_path / "out" / "paper_poll.json").read_text())
    assert "error" not in document["details"] and document["details"]["assets"] == 8
    assert [figure["what"] for figure in document["figures"]] == [
        "parquet files: poll with nothing new", "wide CSV: poll with nothing new",
        "parquet files: poll after one bar appended to every asset",
        "wide CSV: poll after one bar appended to every asset",
        "parquet files: poll after one asset's file changed"]
    assert all(figure["platform"] > 0 and figure["peer"] > 0 for figure in document["figures"])
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out"]  # the files stay in a temporary folder
