"""Which process is writing a run (or an ingest) folder, and whether it has ended (then the folder is abandoned)."""

import json
import os
import socket
import time
import uuid

from prisma_core.store.location import Location

_OWNER_FILE = "owner.json"  # in a run folder: the process that is writing the run (host, pid)
_UNOWNED_GRACE_S = 60.0  # a run folder with no owner file is only considered abandoned after this long


def mark_owner(folder: Location) -> None:
    """Marks a new run (or ingest) folder with the process writing it (host, pid)."""
    (folder / _OWNER_FILE).write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid()}))


def new_owner_note() -> str:
    """This process (host, pid) with a token of its own, so that two threads of one process are two owners."""
    return json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "token": uuid.uuid4().hex})


def in_use(folder: Location) -> bool:
    """Whether the folder is there and the process that marked it is still running."""
    return folder.modified() is not None and not owner_is_gone(folder)


def owner_is_gone(folder: Location) -> bool:
    """True when the process that created this run folder has ended (it can only be checked on this machine)."""
    try:
        owner = json.loads((folder / _OWNER_FILE).read_text())
    except (OSError, ValueError):
        modified = folder.modified()
        return modified is not None and time.time() - modified > _UNOWNED_GRACE_S
    return process_is_gone(owner)


def note_is_gone(note: str) -> bool:
    """Whether the process an owner note (JSON, `new_owner_note`) names has ended."""
    try:
        return process_is_gone(json.loads(note))
    except ValueError:
        return False


def process_is_gone(owner: dict) -> bool:
    """Whether the process an owner note names (host, pid) has ended: only known on its own machine."""
    if not isinstance(owner, dict) or owner.get("host") != socket.gethostname() or os.name == "nt":
        return False  # on Windows, os.kill would end the process
    try:
        os.kill(int(owner["pid"]), 0)
    except ProcessLookupError:
        return True
    except (OSError, KeyError, TypeError, ValueError):  # PermissionError: alive, run by another user
        return False
    return False
