#!/usr/bin/env bash
# Create ./.venv and install the project. `scripts/setup.sh test` adds the test tools,
# `scripts/setup.sh bench` the benchmark peers (Stable-Baselines3, gym-anytrading, FinRL), `scripts/setup.sh gpu`
# NVML for the GPU columns of every trial's system metrics (extras combine: `scripts/setup.sh test,gpu`).
# `scripts/setup.sh portfolio` is a step, not a pip extra: universal-portfolios (see below); `test` runs it too.
# torch: a CPU build (2.13.0) is installed only when the venv has no torch yet, so a
# CUDA build you installed first (pip install torch --index-url ...) is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
IFS=, read -ra requested <<< "$extras"
pip_extras=()
for item in "${requested[@]}"; do [[ $item == portfolio ]] || pip_extras+=("$item"); done
pip_list=$(IFS=,; echo "${pip_extras[*]}")
python3 -m venv .venv
py=.venv/bin/python
if ! "$py" -c "import torch" 2>/dev/null; then
  "$py" -m pip install --quiet "torch==2.13.0"
fi
"$py" -m pip install --quiet -e ".${pip_list:+[$pip_list]}"

# universal-portfolios 0.4.17 (the OLPS algorithms and the NYSE(O) data, envs/portfolio/olps.py) declares pandas<3,
# yfinance and pandas-datareader, so as an extra it would downgrade pandas 3: it goes in with --no-deps, beside the
# modules it imports, pinned exactly (docs/portfolio.md compares its results under pandas 2.3.3 and 3). skfolio: the
# minimum-variance baseline. The constraint file holds pandas and numpy where they are, so pip fails rather than
# moving them.
if [[ ",$extras," == *,portfolio,* || ",$extras," == *,test,* ]]; then
  "$py" -m pip install --quiet --no-deps "universal-portfolios==0.4.17"
  "$py" -m pip install --quiet -c <("$py" -m pip freeze | grep -iE '^(pandas|numpy)==') "cvxopt==1.3.3" \
    "statsmodels==0.15.0" "seaborn==0.13.2" "plotly==7.1.0" "six==1.17.0" "skfolio==1.12.2"
  echo "note: a pip dependency-conflict error that universal-portfolios wants pandas<3, yfinance and" \
       "pandas-datareader is expected: it runs on pandas 3 without them (docs/portfolio.md)"
fi

# The test extra also needs a browser for tests/integration/test_mlflow_ui_browser.py: Debian's
# chromium + chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver; Selenium drives them, nothing is
# downloaded). Installed only as root with apt; otherwise that test is skipped with a note.
if [[ ",$extras," == *,test,* ]] && ! { command -v chromium && command -v chromedriver; } >/dev/null 2>&1; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver \
      || echo "note: could not install chromium + chromium-driver with apt; the MLflow UI browser test will be skipped"
  else
    echo "note: chromium or chromedriver missing and apt-get unavailable (or not root): install chromium and chromium-driver" \
         "(e.g. sudo apt-get install chromium chromium-driver) to run the MLflow UI browser test; it is skipped otherwise"
  fi
fi
