"""`python tests/helpers/reliability_family_writer.py WORKSPACE RUN_ID START SETTINGS REPEATS`: one session
rebuilding families.

Rebuilds the run's families with SETTINGS (FamilyConfig's fields as JSON), REPEATS times in a row, once every
process of the start line START is ready (start_line.py).
"""

import json
import sys

from start_line import wait_at

from prisma_core import pipeline
from prisma_core.concepts.families import FamilyConfig
from prisma_core.store import Workspace


def main(workspace_path: str, run_id: str, start: str, settings: str, repeats: str) -> int:
    workspace = Workspace(workspace_path)
    wait_at(start)
    for _ in range(int(repeats)):
        pipeline.rebuild_families(workspace, run_id, FamilyConfig(**json.loads(settings)))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
