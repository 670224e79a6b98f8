"""One LanceDB database per workspace folder: datasets, documents, vectors, SAE runs and everything derived.

The store owns ids and run records. Artefacts are written first and the run record last, so a run that crashed
half-way never shows up as complete. Every write is a LanceDB commit (a new table version): a failed write leaves
the previous version readable.
"""

from __future__ import annotations

import os
from pathlib import Path

from prisma_core.errors import StoreError
from prisma_core.store.artefacts import Artefacts
from prisma_core.store.stages import Stages
from prisma_core.store.vectors import Vectors

WORKSPACE_ENV = "PRISMA_WORKSPACE"
DEFAULT_WORKSPACE = "prisma_data"


def resolve_workspace(path: str | Path | None = None) -> Path:
    return Path(path or os.environ.get(WORKSPACE_ENV) or DEFAULT_WORKSPACE).expanduser().resolve()


class Workspace(Vectors, Artefacts, Stages):
    """A workspace folder: `lancedb/` holds the tables, `runs/<run_id>/` the SAE weights."""

    def __init__(self, path: str | Path | None = None) -> None:
        import lancedb  # here, not at the top: commands that open no workspace (--help) do not pay its import

        self.path = resolve_workspace(path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self.db = lancedb.connect(str(self.path / "lancedb"))
        except OSError as error:
            raise StoreError(f"Cannot open the workspace folder {self.path}: {error}") from error
