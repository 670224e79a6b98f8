"""Writes that retry on LanceDB commit conflicts and turn disk failures into a StoreError."""

import random
import re
import time
from collections.abc import Callable
from typing import TypeVar

from prisma_core.errors import StoreError

_LANCE_NOISE = re.compile(r"^lance error: LanceError\(\w+\): |, /\S+\.rs:\d+:\d+$")

T = TypeVar("T")


def retry(write: Callable[[], T], attempts: int = 8) -> T:
    """Concurrent writers on one table can hit a commit conflict; LanceDB wants the loser to retry.

    The random factor in the back-off keeps two sessions from retrying in lockstep. A write that still fails (a
    full disk, a read-only folder) raises StoreError; LanceDB commits are atomic, so the stored data is unchanged.
    """
    for attempt in range(attempts):
        try:
            return write()
        except (OSError, RuntimeError, ValueError) as error:
            conflict = "conflict" in str(error).lower()
            if conflict and attempt < attempts - 1:
                time.sleep(0.05 * 2**attempt * (0.5 + random.random()))
                continue
            if conflict:
                raise StoreError("The workspace is busy: other sessions kept writing to it. Try again.") from error
            if isinstance(error, ValueError):
                raise
            reason = _LANCE_NOISE.sub("", str(error))
            raise StoreError(
                f"Could not write to the workspace: {reason}. What was stored before is unchanged; "
                "free some disk space or check the folder's permissions, then try again."
            ) from error
    raise AssertionError("unreachable")
