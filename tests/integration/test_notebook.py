"""notebooks/compare_runs.ipynb executed top to bottom on a real (tiny) sweep's MLflow store."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow

EXPERIMENT = "compare_smoke"


def smoke_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, Path]:
    """(tracking URI, experiment name, output folder) of one `--smoke-test` sweep, run once per pytest
    session and shared by the notebook and MLflow UI tests (a marker file says it finished)."""
    from experiments.run import main

    out = tmp_path_factory.getbasetemp() / "compare_smoke"
    uri = f"sqlite:///{out / 'mlflow.db'}"
    if not (out / "done").exists():
        import ray

        ray.shutdown()  # another test module may have left a session behind
        out.mkdir(exist_ok=True)
        code = main([str(REPO / "conf/dqn_btc.yaml"), "--smoke-test", "--no-dashboard", "--output", str(out),
                     "--set", f"tracking.tracking_uri={uri}", "--set", f"tracking.experiment_name={EXPERIMENT}"])
        assert code == 0, "the smoke sweep failed"
        (out / "done").write_text("ok\n")
    return uri, EXPERIMENT, out


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return smoke_store(tmp_path_factory)


def test_notebook_runs_headless_and_draws_figures(store, monkeypatch):
    import nbclient
    import nbformat
    from mlflow.tracking import MlflowClient

    uri, name, out = store
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)  # the kernel inherits the environment
    monkeypatch.setenv("EXPERIMENT_NAME", name)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    notebook = nbformat.read(REPO / "notebooks/compare_runs.ipynb", as_version=4)
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(REPO / "notebooks")}}).execute()
    nbformat.write(notebook, out / "compare_runs.executed.ipynb")  # for a look after a failure

    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert not [o for o in outputs if o.output_type == "stream" and o.name == "stderr"]
    figures = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(figures) >= 3  # learning curves, last validation return per trial, equity plot
    text = "\n".join(o.get("text", "") + o.get("data", {}).get("text/html", "") for o in outputs)
    assert f"experiment '{name}'" in text
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name(name).experiment_id])
    for run in runs:  # every sweep and trial appears in the tables
        assert run.info.run_name in text
    assert "buy_and_hold" in text and "eval/sharpe" in text  # evaluation.csv and the parent's eval/* metrics
