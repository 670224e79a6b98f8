#!/usr/bin/env bash
# Run the tests (installs everything first, chromium included). With no arguments: the whole suite, as CI runs it,
# in two parts: every test but the `alone` ones on two workers (pytest-xdist; each worker takes whole files, and the
# tests sharing an expensive session fixture together: tests/conftest.py), then the `alone` ones (benchmarks and
# browser tests, which time their work or wait on a browser) one at a time. With arguments: one pytest run with them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev
export HF_HUB_OFFLINE=1
if [ "$#" -gt 0 ]; then
  exec .venv/bin/python -m pytest "$@"
fi
status=0
OMP_NUM_THREADS=1 .venv/bin/python -m pytest -p no:cacheprovider -n 2 --dist loadgroup -m "not alone" || status=$?
.venv/bin/python -m pytest -p no:cacheprovider -m alone || status=$?
exit "$status"
