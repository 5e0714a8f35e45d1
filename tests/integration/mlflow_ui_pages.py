"""Selenium steps on the MLflow 3.17 UI (runs table, compare page, chart view), for browser tests.

Every function takes a Selenium `driver` already on (or able to open) an MLflow server on loopback and waits
with `WebDriverWait` (`WAIT_S`) for what it needs; none sleeps blindly. Only selenium is imported.

What the runs page keeps where (read from MLflow 3.17's JS bundle, checked in headless Chromium):
- URL search params it reads: `searchFilter` (a search_runs filter), `orderByKey` (e.g.
  ``metrics.`verdict/pbo` ``, `attributes.start_time`), `orderByAsc` (`true`/`false`), `startTime` (`ALL`,
  `LAST_HOUR`, ...), `lifecycleFilter` (`Active`/`Deleted`), `modelVersionFilter`, `datasetsFilter` (base64 of
  a JSON list of `{name, digest, context}`), `compareRunsMode` (`TABLE`, `CHART`, ...: the runs table or the
  chart view), `workflowType=machine_learning` (the global GenAI / Model training switch) and
  `viewStateShareKey`.
- The shown columns (`selectedColumns`), expanded parents, pinned/hidden runs and the charts are *not* URL
  params: they live in localStorage (``MLflowLocalStorage-1.1-ExperimentPage-["<id>"]-ReactComponentState``),
  or come from a shared view: an experiment tag `mlflow.sharedViewState.<key>` holding that state as JSON,
  opened with `?viewStateShareKey=<key>` (experiments/tracking/comparison_view.py writes one per sweep). A
  shared view ignores `runsExpanded`, `runsPinned`, `runsHidden`, `runsVisibilityMap`, `autoRefreshEnabled`, and
  is ignored when the URL also holds search params; it is not written to localStorage (unless the user presses
  "Override saved view").
  The "Views" menu (saved views) keeps its views in the same experiment tags, as an envelope
  `{"name", "createdAt", "updatedAt", "state"}`.
"""
from __future__ import annotations

import json
import re
from collections.abc import Sequence

from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

WAIT_S = 60
_IGNORED = (StaleElementReferenceException,)


def _wait(driver: WebDriver, timeout: float = WAIT_S) -> WebDriverWait:
    return WebDriverWait(driver, timeout, ignored_exceptions=_IGNORED)


def _css(driver: WebDriver | WebElement, selector: str) -> list[WebElement]:
    return driver.find_elements(By.CSS_SELECTOR, selector)


def _row(run_id: str) -> str:
    """CSS of a run's row in the runs table (the pinned left part and the scrolled part are two rows)."""
    return f"div[role='row'][row-id='{run_id}']"



def open_page(driver: WebDriver, url: str) -> None:
    """Load `url` as a fresh page. A `driver.get` that changes only the `#/...` part keeps the single-page
    app running, and in 3.17 the runs page can then stay on its loading skeleton (seen going from a shared
    view back to the plain runs URL); going through about:blank avoids it."""
    driver.get("about:blank")
    driver.get(url)


def close_assistant_panel(driver: WebDriver) -> None:
    """MLflow 3 opens an 'MLflow Assistant' side panel over part of the runs table on first load."""
    for button in _css(driver, "button[data-component-id$='chat_panel.close']"):
        button.click()


def wait_runs_table(driver: WebDriver, run_ids: Sequence[str] = ()) -> None:
    """Wait until the runs table is on the page ('N matching runs') with the rows of `run_ids`."""
    _wait(driver).until(lambda d: "matching runs" in d.find_element(By.TAG_NAME, "body").text
                        and all(_css(d, _row(run_id)) for run_id in run_ids))
    close_assistant_panel(driver)


def expand_parent(driver: WebDriver, parent_run_id: str, child_run_ids: Sequence[str] = ()) -> None:
    """Expand a parent run's row in the runs table so its child runs show and wait for the `child_run_ids`
    rows; does nothing if they already show (the expanded parents are kept in localStorage). Without
    `child_run_ids` it just clicks the button (a toggle) and waits for its icon to flip."""
    button_css = f"{_row(parent_run_id)} button[data-component-id*='runnamecellrenderer']"
    button = _wait(driver).until(lambda d: next(iter(_css(d, button_css)), None))
    if child_run_ids and all(_css(driver, _row(run_id)) for run_id in child_run_ids):
        return
    before = button.get_attribute("innerHTML")
    button.click()
    if child_run_ids:
        _wait(driver).until(lambda d: all(_css(d, _row(run_id)) for run_id in child_run_ids))
    else:
        _wait(driver).until(
            lambda d: d.find_element(By.CSS_SELECTOR, button_css).get_attribute("innerHTML") != before)


def column_header_keys(driver: WebDriver) -> list[str]:
    """The keys (``metrics.`verdict/pbo` `` ...) of the columns the runs table shows."""
    return [cell.get_attribute("col-id") for cell in _css(driver, "div[role='columnheader'][col-id]")]



def select_runs(driver: WebDriver, run_ids: Sequence[str]) -> None:
    """Tick the checkboxes of the rows of `run_ids` (they must be shown: expand their parents first)."""
    for run_id in run_ids:
        box_css = f"{_row(run_id)} input[type='checkbox']"
        box = _wait(driver).until(lambda d, css=box_css: next(iter(_css(d, css)), None))
        if not box.is_selected():
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", box)
            box.click()
        _wait(driver).until(lambda d, css=box_css: d.find_element(By.CSS_SELECTOR, css).is_selected())


def open_compare(driver: WebDriver, run_count: int | None = None) -> None:
    """Press the runs table's Compare button (runs must be selected) and wait for the compare page
    (`#/compare-runs?runs=[...]&experiments=[...]`) and its parallel-coordinates plot. Note: the compare page
    shows the GenAI side bar whatever `workflowType` was."""
    compare = "button[data-testid='runs-compare-button']"
    button = _wait(driver).until(lambda d: next(iter(_css(d, compare)), None))
    button.click()
    _wait(driver).until(lambda d: "/compare-runs" in d.current_url)
    expected = f"Comparing {run_count} Runs" if run_count else "Comparing "
    _wait(driver).until(lambda d: expected in d.find_element(By.TAG_NAME, "body").text
                        and (_css(d, ".pcp-plot") or _css(d, "[data-testid='no-values-selected']")))



def parallel_coordinates_axes(driver: WebDriver) -> list[str]:
    """The axis titles of the compare page's parallel-coordinates plot (params first, then metrics)."""
    return [title.text for title in _css(driver, ".pcp-plot .parcoords .y-axis .axis-heading .axis-title")]


def _selected(driver: WebDriver, index: int) -> list[str]:
    """The keys chosen in the compare page's multi-select `index` (0: Parameters, 1: Metrics)."""
    select = _css(driver, ".du-bois-light-select-multiple")[index]
    return [item.text for item in _css(select, ".du-bois-light-select-selection-item-content")]


def parallel_coordinates_shows(driver: WebDriver, params: str | Sequence[str],
                               metrics: str | Sequence[str]) -> None:
    """On the compare page, make the parallel-coordinates plot use exactly `params` and `metrics` and wait
    until plotly has drawn an axis for each, in that order.

    By default the plot takes the first 3 (sorted) params whose values differ between the runs and the first
    metric all runs share, in the order the store returned them, so a test should not rely on it: this
    clears the choice ("Clear All") and picks the keys in the two multi-selects."""
    params = [params] if isinstance(params, str) else list(params)
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    _wait(driver).until(lambda d: _css(d, "[data-testid='clear-button']"))[0].click()
    _wait(driver).until(lambda d: _css(d, "[data-testid='no-values-selected']"))
    for index, keys in ((0, params), (1, metrics)):  # the Parameters select, then the Metrics one
        for key in keys:
            select = _css(driver, ".du-bois-light-select-multiple")[index]
            select.find_element(By.CSS_SELECTOR, ".du-bois-light-select-selector").click()
            select.find_element(By.CSS_SELECTOR, "input").send_keys(key)
            option_css = (".du-bois-light-select-dropdown:not(.du-bois-light-select-dropdown-hidden) "
                          f".du-bois-light-select-item-option[title={json.dumps(key)}]")
            _wait(driver).until(
                lambda d, css=option_css: next((o for o in _css(d, css) if o.is_displayed()), None)).click()
            _wait(driver).until(lambda d, k=key, i=index: k in _selected(d, i))
            select.find_element(By.CSS_SELECTOR, "input").send_keys(Keys.ESCAPE)
    _wait(driver).until(lambda d: parallel_coordinates_axes(d) == [*params, *metrics])


def dataset_names_in_table(driver: WebDriver, run_id: str | None = None) -> list[str]:
    """The dataset names (without the ` (digest)` the cell adds) in the runs table's Dataset column, sorted
    and unique, of all shown rows or of `run_id`'s row. A cell shows its first dataset and "+N" for the
    others, which are in the DOM, hidden; they count too (read from `textContent`)."""
    row = _row(run_id) if run_id else "div[role='row']"
    cells = f"{row} [col-id='attributes.`Dataset`'] button[data-testid='open-dataset-drawer']"
    buttons = _wait(driver).until(lambda d: _css(d, cells))
    names = {re.sub(r" \([^()]*\)$", "", (b.get_attribute("textContent") or "").strip()) for b in buttons}
    return sorted(name for name in names if name)


def open_chart_view(driver: WebDriver) -> None:
    """Switch the runs page to its chart view (the same as the URL param `compareRunsMode=CHART`) and wait
    for the first chart card. With no saved charts, MLflow makes one line chart per metric, in sections
    named after the metric's prefix (`evaluation/env_runners`, ...), over the runs the table shows (the
    first 10 visible rows: expand a parent first to chart its children)."""
    label = _wait(driver).until(lambda d: next(iter(d.find_elements(
        By.XPATH, "//input[@name='runs-view-mode' and @value='CHART']/ancestor::label")), None))
    label.click()
    _wait(driver).until(lambda d: "compareRunsMode=CHART" in d.current_url
                        and _css(d, "[data-testid='experiment-view-compare-runs-card']"))


def _chart_card(driver: WebDriver, metric: str) -> WebElement | None:
    return next(iter(driver.find_elements(By.XPATH, "//div[@data-testid='experiment-view-compare-runs-card']"
                                                    f"[.//h4[@title={json.dumps(metric)}]]")), None)


def line_chart_runs(driver: WebDriver, metric: str, min_lines: int = 2) -> tuple[list[str], int]:
    """In the chart view, wait until the line chart of `metric` has drawn at least `min_lines` distinct
    lines; return (the run names in its legend, the number of distinct lines). The legend lists every
    charted run, also those without the metric (e.g. the parent runs); plotly draws each line twice (line
    and hover layer), so lines are counted by distinct SVG paths."""
    search = _wait(driver).until(lambda d: next(iter(_css(d, "input[placeholder='Search metric charts']")), None))
    search.send_keys(metric)  # only its chart stays: the others (dozens of RLlib timings) may not be rendered
    card = _wait(driver).until(lambda d: _chart_card(d, metric))
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", card)

    def lines(d: WebDriver) -> int:
        found = _chart_card(d, metric)
        paths = {p.get_attribute("d") for p in _css(found, ".js-plotly-plot g.trace.scatter path.js-line")
                 } if found else set()
        return len({path for path in paths if path and path != "M0,0"})

    _wait(driver).until(lambda d: lines(d) >= min_lines)
    suffix = f" ({metric})"
    legend = _chart_card(driver, metric).text.splitlines()
    names = [line[: -len(suffix)] for line in legend if line.endswith(suffix)]
    return names, lines(driver)


def cell_text(driver: WebDriver, run_id: str, key: str) -> str:
    """The text of a runs-table cell: the row of `run_id`, the column `key`
    (``experiments.tracking.comparison_view.column(...)`` or ``attributes.`Dataset` ``). The column must be shown and
    rendered (the grid may skip far off-screen columns)."""
    css = f"{_row(run_id)} [col-id={json.dumps(key)}]"
    return _wait(driver).until(lambda d: next(iter(_css(d, css)), None)).text
