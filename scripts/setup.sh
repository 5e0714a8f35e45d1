#!/usr/bin/env bash
# Create ./.venv and install the project. `scripts/setup.sh test` adds the test tools,
# `scripts/setup.sh bench` the benchmark peers (Stable-Baselines3, gym-anytrading).
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
