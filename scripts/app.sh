#!/usr/bin/env bash
# Start the Prisma app on the bundled offline model, with the workspace in ./prisma_data (or $PRISMA_WORKSPACE).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"
exec .venv/bin/streamlit run app.py "$@"
