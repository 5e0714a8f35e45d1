"""The API notebook's smoke run of conf/dqn_btc.yaml (notebooks/api_quickstart.ipynb, docs/api.md's example), made
once per pytest session and read by the notebook, trials-ledger and MLflow UI tests; and a second sweep of the same
file into a copy of its store, the research loop's next hypothesis (another feature set), made once too."""
from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.servers import joining

EXPERIMENT = "dqn_btc"  # the API example runs conf/dqn_btc.yaml as it is
API_NOTEBOOK = REPO / "notebooks/api_quickstart.ipynb"


def execute(path: Path, out: Path, environment: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> object:
    """The notebook at `path` run top to bottom in a fresh kernel (which inherits `environment`); the executed copy is
    kept in `out` for a look after a failure."""
    import nbclient
    import nbformat

    for key, value in environment.items():
        monkeypatch.setenv(key, value)
    notebook = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(notebook, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(REPO / "notebooks")}}).execute()
    nbformat.write(notebook, out / f"{path.stem}.executed.ipynb")
    return notebook


def smoke_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, Path]:
    """(tracking URI, experiment name, output folder) of the API notebook's smoke sweep, run once per pytest session
    and shared by the notebook and MLflow UI tests (a marker file says it finished)."""
    out = tmp_path_factory.getbasetemp() / "api_smoke"
    uri = f"sqlite:///{out / 'mlflow.db'}"
    if not (out / "done").exists():
        import ray

        ray.shutdown()  # another test module may have left a session behind
        out.mkdir(exist_ok=True)
        with pytest.MonkeyPatch.context() as monkeypatch:
            notebook = execute(API_NOTEBOOK, out, {"MLFLOW_TRACKING_URI": uri,
                                                   "MPLBACKEND": "module://matplotlib_inline.backend_inline"},
                               monkeypatch)
        errors = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs
                  if o.output_type == "error"]
        assert not errors, "\n".join("\n".join(o.traceback) for o in errors)
        (out / "outputs.txt").write_text("\n".join(texts(notebook)))
        (out / "figures").write_text(str(sum("image/png" in o.get("data", {}) for cell in notebook.cells
                                             if cell.cell_type == "code" for o in cell.outputs)))
        (out / "done").write_text("ok\n")
    return uri, EXPERIMENT, out


def texts(notebook: object) -> list[str]:
    return [o.get("text", "") + o.get("data", {}).get("text/plain", "") + o.get("data", {}).get("text/html", "")
            for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]



# The second sweep's hypothesis: the eight basic features plus RSI(14).
OTHER_FEATURES = "environment.env_config.features=[basic, {ta: RSI, timeperiod: 14}]"


def second_sweep(tmp_path_factory: pytest.TempPathFactory, ray_address: str) -> tuple[str, str, str]:
    """(tracking URI, experiment name, what the run printed) of a copy of the notebook's smoke store with a second
    sweep in it, run in this process on the Ray at `ray_address`, once per session (a marker file says it finished;
    the notebook test reads the original store, whose newest sweep must stay its own)."""
    from experiments.run import main

    _, name, out = smoke_store(tmp_path_factory)
    here = tmp_path_factory.getbasetemp() / "second_sweep"
    uri = f"sqlite:///{here / 'mlflow.db'}"
    if not (here / "done").exists():
        here.mkdir(exist_ok=True)
        shutil.copy(out / "mlflow.db", here / "mlflow.db")
        printed = io.StringIO()
        with joining(ray_address) as joined, contextlib.redirect_stdout(printed):
            code = main([str(REPO / "conf/dqn_btc.yaml"), "--smoke-test", "--no-dashboard", "--output", str(here),
                         "--set", f"tracking.tracking_uri={uri}", "--set", f"tracking.experiment_name={name}",
                         "--set", OTHER_FEATURES, *joined])
        assert code == 0, printed.getvalue()[-3000:]
        (here / "stdout.txt").write_text(printed.getvalue())
        (here / "done").write_text("ok\n")
    return uri, name, (here / "stdout.txt").read_text()
