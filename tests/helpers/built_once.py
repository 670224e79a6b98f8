"""A session fixture's artefact built once per test run, however many pytest-xdist workers ask for it: the first to
ask builds it under a lock in the folder all workers of the run share; the others wait for it, then read it."""

from __future__ import annotations

import fcntl
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], T]) -> T:
    """`build(folder)`'s result, computed once per run into `folder` (it must keep what it returns readable)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # each worker has its own base folder, in the run's
        root = root.parent
    result = root / f"{name}.pickle"  # our own test artefact, never an upload
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the lock file is closed
        if not result.is_file():
            folder = root / name
            folder.mkdir()
            partial = result.with_suffix(".partial")
            partial.write_bytes(pickle.dumps(build(folder)))
            partial.replace(result)
        return pickle.loads(result.read_bytes())
