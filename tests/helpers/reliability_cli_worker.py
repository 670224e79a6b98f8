"""`python tests/helpers/reliability_cli_worker.py WORKSPACE START JSON`: another session running CLI commands.

Runs the commands (a JSON list of argument lists, without `--workspace`) one after the other in one process,
once every process of the start line START is ready (start_line.py), and stops at the first that fails.
"""

import json
import sys

from start_line import wait_at

from prisma_core import cli


def main(workspace_path: str, start: str, commands: str) -> int:
    wait_at(start)
    for command in json.loads(commands):
        status = cli.main([*command, "--workspace", workspace_path])
        if status:
            return status
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
