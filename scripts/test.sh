#!/usr/bin/env bash
# Run the whole test suite (installs everything first, chromium included).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev
export HF_HUB_OFFLINE=1
exec .venv/bin/python -m pytest "$@"
