"""`python tests/helpers/reliability_cli_worker.py WORKSPACE START JSON`: another session running CLI commands.

Runs the commands (a JSON list of argument lists, without `--workspace`) one after the other in one process,
starting at the wall-clock time START (after the imports), and stops at the first that fails.
"""

import json
import sys
import time

from prisma_core import cli


def main(workspace_path: str, start: str, commands: str) -> int:
    time.sleep(max(0.0, float(start) - time.time()))
    for command in json.loads(commands):
        status = cli.main([*command, "--workspace", workspace_path])
        if status:
            return status
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
