"""The comparison a user makes in the MLflow UI, in a real headless Chromium driven by Selenium.

Two `--smoke-test` sweeps of conf/dqn_btc.yaml in one experiment (the notebook's sweep, then the same with another
feature set: the research loop's next hypothesis), served by `mlflow server` on a free loopback port. From the link a
run prints: the sweeps with their verdicts and data as columns, a sweep expanded into its trials, the trials compared
(parallel coordinates of the searched parameter and the validation metric), and their validation returns overlaid in
the chart view. Screenshots of every step are saved on success too (docs/mlflow.md shows them: set
MLFLOW_UI_SCREENSHOTS=docs/images/mlflow to write them there), and of the page that failed.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

import envs
from tests.conftest import REPO
from tests.integration.api_smoke import second_sweep
from tests.servers import mlflow_server as mlflow_server_on

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
                                reason="needs Debian's chromium and chromium-driver (/usr/bin/chromium, "
                                       "/usr/bin/chromedriver): `scripts/setup.sh test` installs them as root")
# Without the background-networking flags Chromium keeps dialing Google's hosts, which this closed
# network refuses; --no-sandbox because tests run as root in CI.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=2560,1000"]
SEARCHED = "training.n_step"  # conf/dqn_btc.yaml's search space (a smoke test samples one point per sweep)
VALIDATION = "evaluation/env_runners/episode_return_mean"
BASELINES = tuple(b.name for b in envs.family("trading/Spot-v0").baseline_table())  # read, never pinned


@pytest.fixture(scope="module")
def two_sweeps(tmp_path_factory, ray_cluster) -> tuple[str, str]:
    """(tracking URI, experiment name) of the notebook's smoke store with a second sweep in it (tests/integration/
    api_smoke.py)."""
    uri, name, _ = second_sweep(tmp_path_factory, ray_cluster)
    return uri, name


@pytest.fixture(scope="module")
def mlflow_server(two_sweeps, tmp_path_factory) -> Iterator[str]:
    """Base URL of `mlflow server` on the two sweeps' store; the server's process group is always stopped."""
    with mlflow_server_on(two_sweeps[0], tmp_path_factory.mktemp("ui_server") / "mlflow_server.log") as url:
        yield url


@pytest.fixture
def browser(tmp_path):
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the `test` extra")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tempfile.mkdtemp(prefix='chromium-profile-', dir=tmp_path)}")
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def shots(tmp_path) -> Path:
    """Where the screenshots go: MLFLOW_UI_SCREENSHOTS (relative to the repository), else the test's tmp folder."""
    folder = Path(os.environ.get("MLFLOW_UI_SCREENSHOTS") or tmp_path / "screenshots")
    folder = folder if folder.is_absolute() else REPO / folder
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def step(driver, shots: Path, name: str) -> Iterator[None]:
    """One step of the walk: its screenshot `<name>.png` when it passes, `<name>_failed.png` with the URL when not."""
    try:
        yield
    except Exception as error:
        driver.save_screenshot(str(shots / f"{name}_failed.png"))
        raise AssertionError(f"{name}: {type(error).__name__} on {driver.current_url} (screenshot "
                             f"{shots / f'{name}_failed.png'})") from error
    driver.save_screenshot(str(shots / f"{name}.png"))


def test_a_user_compares_two_sweeps_and_the_trials_of_one(two_sweeps, mlflow_server, browser, shots):
    from mlflow.tracking import MlflowClient
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from experiments.tracking.comparison_view import column
    from experiments.tracking.runs import ui_lines
    from tests.integration import mlflow_ui_pages as ui

    uri, name = two_sweeps
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(name)
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    runs = client.search_runs([experiment.experiment_id])
    parents = sorted((r for r in runs if r.data.tags.get("role") == "sweep"), key=lambda r: r.info.start_time)
    children = {p.info.run_id: [r.info.run_id for r in runs if r.data.tags.get("mlflow.parentRunId") == p.info.run_id]
                for p in parents}
    assert len(parents) == 2 and all(len(c) == 2 for c in children.values())
    newest = parents[-1].info.run_id
    [link] = [line.split(": ", 1)[1] for line in ui_lines(mlflow_server, [("run", experiment.experiment_id)])]

    with step(browser, shots, "1_sweeps_with_their_verdicts"):
        ui.open_page(browser, link)
        ui.wait_runs_table(browser, [p.info.run_id for p in parents])
        assert "/runs" in browser.current_url and "Token Usage" not in browser.find_element(By.TAG_NAME, "body").text
        # (no verdict/pbo: a smoke sweep scores one configuration, and PBO needs two; the UI shows no empty column)
        verdict_columns = [column("metrics", "verdict/agent_sharpe_mean"),
                           column("metrics", "verdict/attempt"),
                           *(column("tags", f"verdict.{b}") for b in BASELINES),
                           *(column("metrics", f"verdict/wins/{b}") for b in BASELINES),
                           *(column("metrics", f"verdict/dsr/{b}") for b in BASELINES)]
        assert set(verdict_columns) <= set(ui.column_header_keys(browser))  # the saved view the link opens
        for parent in parents:
            words = ui.cell_text(browser, parent.info.run_id, column("tags", "verdict.buy_and_hold"))
            assert words == parent.data.tags["verdict.buy_and_hold"] and words in ("supported", "not_supported")
        assert ui.dataset_names_in_table(browser) == ["BTC-USD_1h[test]", "BTC-USD_1h[train]",
                                                      "BTC-USD_1h[validation]"]

    with step(browser, shots, "2_a_sweep_expanded_into_its_trials"):
        ui.expand_parent(browser, newest, children[newest])
        assert column("params", SEARCHED) in ui.column_header_keys(browser)

    with step(browser, shots, "3_trials_compared"):
        ui.expand_parent(browser, parents[0].info.run_id, children[parents[0].info.run_id])
        trials = [run_id for ids in children.values() for run_id in ids]
        ui.select_runs(browser, trials)
        ui.open_compare(browser, len(trials))
        ui.parallel_coordinates_shows(browser, SEARCHED, VALIDATION)

    with step(browser, shots, "4_validation_returns_overlaid"):
        ui.open_page(browser, link)
        ui.wait_runs_table(browser, [p.info.run_id for p in parents])
        ui.expand_parent(browser, newest, children[newest])
        ui.open_chart_view(browser)
        charted, lines = ui.line_chart_runs(browser, VALIDATION, min_lines=2)
        trial_names = {r.info.run_name for r in runs if r.info.run_id in children[newest]}
        assert trial_names <= set(charted) and lines >= 2

    with step(browser, shots, "5_the_sweeps_own_page"):
        ui.open_page(browser, f"{mlflow_server}/#/experiments/{experiment.experiment_id}/runs/{newest}")
        WebDriverWait(browser, ui.WAIT_S).until(lambda d: all(
            key in d.find_element(By.TAG_NAME, "body").text
            for key in (parents[-1].info.run_name, "verdict/agent_sharpe_mean", "eval/sharpe")))
