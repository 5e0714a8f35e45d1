#!/usr/bin/env bash
# Create ./.venv and install the project. `scripts/setup.sh test` adds the test tools,
# `scripts/setup.sh bench` the benchmark peers (Stable-Baselines3, gym-anytrading), `scripts/setup.sh gpu`
# NVML for the GPU columns of every trial's system metrics (extras combine: `scripts/setup.sh test,gpu`).
# torch: a CPU build (2.13.0) is installed only when the venv has no torch yet, so a
# CUDA build you installed first (pip install torch --index-url ...) is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
python3 -m venv .venv
py=.venv/bin/python
if ! "$py" -c "import torch" 2>/dev/null; then
  "$py" -m pip install --quiet "torch==2.13.0"
fi
"$py" -m pip install --quiet -e ".${extras:+[$extras]}"

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
