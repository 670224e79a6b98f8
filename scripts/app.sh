#!/usr/bin/env bash
# Start the Prisma app on the bundled offline model, with the workspace in ./prisma_data (or $PRISMA_WORKSPACE).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"
# Two malloc heaps for all the server's threads: the 400-note demo peaks ~90 MB lower (prisma_core/memory.py).
export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-2}"
exec .venv/bin/streamlit run app.py "$@"
