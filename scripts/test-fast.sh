#!/usr/bin/env bash
# The fast tier: every test but the slow, browser and load ones (tests/core and tests/ui on the real bundled model and
# small real data). Extra arguments go to pytest. The whole suite: scripts/test.sh.
set -euo pipefail
exec bash "$(dirname "$0")/test.sh" -m "not slow and not browser and not load" "$@"
