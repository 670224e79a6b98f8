#!/usr/bin/env bash
# Run the tests (installs everything first, chromium included). With no arguments: the whole suite, as CI runs it, on
# two pytest-xdist workers of one thread each (each worker takes whole files, and the files sharing an expensive
# session fixture together: tests/conftest.py). With arguments: one pytest run with them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev
export HF_HUB_OFFLINE=1
if [ "$#" -gt 0 ]; then
  exec .venv/bin/python -m pytest "$@"
fi
OMP_NUM_THREADS=1 exec .venv/bin/python -m pytest -p no:cacheprovider -n 2 --dist loadgroup
