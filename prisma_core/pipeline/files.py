"""Where the files a run is written out to may go (outside the workspace, but for the app's own exports folder), and
a file written whole or not at all: the export, the report and the table over time share them."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from prisma_core.errors import StoreError
from prisma_core.store import Workspace

APP_EXPORTS = "exports"
"""The workspace folder the app exports into (for downloads): the one place inside a workspace an export may go."""


def outside_workspace(workspace: Workspace, out: Path, instead: str) -> Path:
    """The resolved path, refused (saying what to do `instead`) when it lies inside the workspace, where the runs'
    files are, except in the app's own exports folder."""
    out = out.expanduser().resolve()
    if out.is_relative_to(workspace.path) and not out.is_relative_to(workspace.path / APP_EXPORTS):
        raise StoreError(f"{out} is inside the workspace {workspace.path}; {instead}.")
    return out


def file_target(workspace: Workspace, out: Path, noun: str, example: str) -> Path:
    """The resolved file to write a `noun` (the report, the table over time) to, once it is known to be safe: not a
    folder, not inside the workspace (except the app's own exports folder)."""
    out = outside_workspace(workspace, out, f"write the {noun} outside it")
    if out.is_dir():
        raise StoreError(f"{out} is a folder; name the {noun}'s file, e.g. {out / example}.")
    if out.exists() and not out.is_file():  # a device or a pipe (/dev/null): the file written would replace it
        raise StoreError(f"{out} is not a file (a device or a pipe); name a file to write the {noun} to.")
    return out


def cannot_stage(what: str, target: Path, error: OSError) -> str:
    """Why `what` cannot be written to `target`: its folder takes no new file (/proc, a read-only disk, no rights)."""
    return f"Could not write {what} to {target}: no file can be made in {target.parent} ({error.strerror or error})."


def write_whole(target: Path, text: str, what: str = "the file") -> Path:
    """Writes `text` to `target` whole or not at all (a temporary file beside it, renamed) and returns it."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, staging = tempfile.mkstemp(prefix=f".prisma-{target.stem}-", suffix=target.suffix, dir=target.parent)
    except OSError as error:
        raise StoreError(cannot_stage(what, target, error)) from error
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        Path(staging).replace(target)
    except OSError as error:
        Path(staging).unlink(missing_ok=True)
        raise StoreError(f"Could not write {target}: {error.strerror or error}.") from error
    return target
