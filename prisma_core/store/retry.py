"""Writes that retry on LanceDB commit conflicts and turn disk failures into a StoreError."""

import random
import re
import time
from collections.abc import Callable
from typing import TypeVar

from prisma_core.errors import StoreError
from prisma_core.store.location import is_object_store

_LANCE_NOISE = re.compile(r"^lance error: (?:LanceError\(\w+\): )?(?:Generic \S+ error: )?|(?:, /\S+\.rs:\d+:\d+)+$")
_WRAPPED = re.compile(r"Wrapped error: ")
_REPEATED = re.compile(r"^(.+?): \1: ")

T = TypeVar("T")

CONFLICT_PATIENCE_S = 120.0
"""How long a write keeps retrying while other sessions commit to the same table.

A budget in time rather than in attempts: on object storage one commit takes a round trip or more, so a busy
table can take many attempts to win, and a fixed count gave up within seconds."""

FIRST_WAIT_S = 0.05
"""The first back-off after a conflict; each further one doubles, up to LONGEST_WAIT_S (each times 0.5 to 1.5)."""
LONGEST_WAIT_S = 2.0


def retry(write: Callable[[], T], where: str, patience_s: float = CONFLICT_PATIENCE_S) -> T:
    """Concurrent writers on one table can hit a commit conflict; LanceDB wants the loser to retry.

    The random factor in the back-off keeps two sessions from retrying in lockstep. A write that still fails (a
    full disk or a read-only folder; for an object store, no connection, keys that may not write, a full quota)
    raises StoreError saying what to check for the workspace at `where` (its uri); LanceDB commits are atomic, so
    the stored data is unchanged.
    """
    give_up_at = time.monotonic() + patience_s
    attempt = 0
    while True:
        try:
            return write()
        except (OSError, RuntimeError, ValueError) as error:
            if "conflict" in str(error).lower():
                wait = min(LONGEST_WAIT_S, FIRST_WAIT_S * 2**attempt) * (0.5 + random.random())
                if time.monotonic() + wait > give_up_at:
                    raise StoreError("The workspace is busy: other sessions kept writing to it. Try again.") from error
                time.sleep(wait)
                attempt += 1
                continue
            if isinstance(error, ValueError):
                raise
            raise StoreError(_write_failed(plain_reason(error), where)) from error


def plain_reason(error: BaseException) -> str:
    """An error's first line without LanceDB's prefix and the Rust source location it appends."""
    first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
    reason = _WRAPPED.sub("", _LANCE_NOISE.sub("", first_line))
    return _REPEATED.sub(r"\1: ", reason)


def _write_failed(reason: str, where: str) -> str:
    """What went wrong and what to check, for the storage the workspace at `where` is on."""
    if is_object_store(where):
        check = (
            "check the connection to the storage service, that your access keys may write to the bucket and that the "
            "bucket is not over its quota"
        )
    else:
        check = "free some disk space or check the folder's permissions"
    return f"Could not write to the workspace: {reason}. What was stored before is unchanged; {check}, then try again."
