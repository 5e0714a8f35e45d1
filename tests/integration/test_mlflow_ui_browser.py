"""The MLflow UI on a finished sweep's store, in a real headless Chromium driven by Selenium.

Starts `mlflow server` on a free loopback port, opens the experiment's runs table, expands the sweep
(parent run) and checks that the experiment and every run name are on the page, then opens the parent
run and checks its out-of-sample `eval/*` metrics. Screenshots go to the test's tmp folder.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests.integration.test_notebook import smoke_store
from tests.servers import mlflow_server as mlflow_server_on

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
                       reason="needs Debian's chromium and chromium-driver (/usr/bin/chromium, "
                              "/usr/bin/chromedriver): `scripts/setup.sh test` installs them as root"),
]
# Without the background-networking flags Chromium keeps dialing Google's hosts, which this closed
# network refuses; --no-sandbox because tests run as root in CI.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1600,1000"]
WAIT_S = 90


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return smoke_store(tmp_path_factory)


@pytest.fixture
def mlflow_server(store, tmp_path):
    """Base URL of `mlflow server` on the smoke store; the server's process group is always stopped."""
    uri, _, _ = store
    with mlflow_server_on(uri, tmp_path / "mlflow_server.log") as url:
        yield url


@pytest.fixture
def browser(tmp_path):
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the `test` extra")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="chromium-profile-", dir=tmp_path)
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _page_text(driver) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.TAG_NAME, "body").text


def _wait_for_text(driver, needles: list[str], screenshot: Path) -> str:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        WebDriverWait(driver, WAIT_S).until(lambda d: all(n in _page_text(d) for n in needles))
    except TimeoutException:
        driver.save_screenshot(str(screenshot))
        missing = [n for n in needles if n not in _page_text(driver)]
        pytest.fail(f"{missing} not on {driver.current_url} after {WAIT_S} s (screenshot {screenshot}); "
                    f"page text:\n{_page_text(driver)[:2000]}")
    return _page_text(driver)


def _close_assistant_panel(driver) -> None:
    """MLflow 3 opens an 'MLflow Assistant' side panel over part of the runs table."""
    from selenium.webdriver.common.by import By

    for button in driver.find_elements(By.CSS_SELECTOR, "button[data-component-id$='chat_panel.close']"):
        button.click()


def test_ui_shows_experiment_and_runs(store, mlflow_server, browser, tmp_path):
    from mlflow.tracking import MlflowClient
    from selenium.webdriver.common.by import By

    uri, name, _ = store
    client = MlflowClient(uri)
    experiment_id = client.get_experiment_by_name(name).experiment_id
    runs = client.search_runs([experiment_id])
    parent = next(r for r in runs if r.data.tags.get("role") == "sweep")
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(children) == 2

    browser.get(f"{mlflow_server}/#/experiments/{experiment_id}/runs")
    _wait_for_text(browser, [name, parent.info.run_name], tmp_path / "runs_table_failed.png")
    _close_assistant_panel(browser)
    # Child runs are nested under their sweep: expand it with the button in the parent's row.
    browser.find_element(By.CSS_SELECTOR, f"div[role='row'][row-id='{parent.info.run_id}'] "
                                          "button[data-component-id*='runnamecellrenderer']").click()
    text = _wait_for_text(browser, [r.info.run_name for r in children], tmp_path / "runs_table_failed.png")
    assert name in text and f"{len(runs)} matching runs" in text
    browser.save_screenshot(str(tmp_path / "mlflow_runs.png"))

    browser.get(f"{mlflow_server}/#/experiments/{experiment_id}/runs/{parent.info.run_id}")
    text = _wait_for_text(browser, [parent.info.run_name, "eval/sharpe", "eval/total_return"],
                          tmp_path / "parent_run_failed.png")
    browser.save_screenshot(str(tmp_path / "mlflow_parent_run.png"))
    print(f"screenshots: {tmp_path / 'mlflow_runs.png'}, {tmp_path / 'mlflow_parent_run.png'}")


def test_the_printed_link_opens_the_training_runs_not_the_genai_overview(store, mlflow_server, browser, tmp_path):
    """MLflow 3 opens an experiment on its GenAI overview (traces, tokens). The experiment is tagged as
    model training and the link the run prints lands on the runs table."""
    from mlflow.tracking import MlflowClient

    from experiments.tracking.runs import ui_url

    uri, name, _ = store
    experiment = MlflowClient(uri).get_experiment_by_name(name)
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    parent = next(r for r in MlflowClient(uri).search_runs([experiment.experiment_id])
                  if r.data.tags.get("role") == "sweep")
    browser.get(ui_url(mlflow_server, experiment.experiment_id))
    text = _wait_for_text(browser, [parent.info.run_name, "matching runs"], tmp_path / "landing_failed.png")
    assert "/runs" in browser.current_url and "Token Usage" not in text
    browser.save_screenshot(str(tmp_path / "mlflow_landing.png"))
