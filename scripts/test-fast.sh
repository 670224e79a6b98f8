#!/usr/bin/env bash
# The fast tier: every test but the slow, browser and load ones (tests/core and tests/ui on the real bundled model and
# small real data), on two pytest-xdist workers of one thread each, as the whole suite runs (a worker with a thread per
# core would compete with the other for the same cores). Extra arguments go to pytest (a later `-n 1` overrides the
# workers). The whole suite: scripts/test.sh.
set -euo pipefail
export OMP_NUM_THREADS=1
exec bash "$(dirname "$0")/test.sh" -p no:cacheprovider -n 2 --dist loadgroup -m "not slow and not browser and not load" "$@"
