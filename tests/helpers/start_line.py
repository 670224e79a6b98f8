"""Processes of one test start their work at the same moment: each, once its imports are done, says it is ready in a
folder they share and waits until all of them have. (A fixed start time, a delay after launch, idled 8 to 25 s on an
idle machine and could still be too short on a busy one.)"""

import os
import time
from pathlib import Path

SEPARATOR = "#"


def start_line(folder: Path, runners: int) -> str:
    """The argument each of the `runners` processes is given (a folder that must not exist yet, and the count)."""
    folder.mkdir(parents=True)
    return f"{folder}{SEPARATOR}{runners}"


def wait_at(line: str, timeout: float = 600) -> None:
    """Say this process is ready, then wait until every process of the `start_line` is."""
    folder, runners = line.rsplit(SEPARATOR, 1)
    Path(folder, f"{os.getpid()}.ready").touch()
    deadline = time.monotonic() + timeout
    while len(list(Path(folder).glob("*.ready"))) < int(runners):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the other processes were not ready within {timeout} s")
        time.sleep(0.01)
