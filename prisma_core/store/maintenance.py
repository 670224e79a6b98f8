"""Disk space: compacting tables and removing old table versions, at most once a day on its own, after a write
(opening a workspace, even to list it, writes nothing)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from prisma_core.errors import StoreError
from prisma_core.store.ids import now_iso
from prisma_core.store.location import Location
from prisma_core.store.retry import retry
from prisma_core.store.tables import Tables

if TYPE_CHECKING:
    import lancedb

_MAINTENANCE_FILE = "maintenance.json"  # in the workspace: when old table versions were last cleaned up
MAINTENANCE_EVERY = timedelta(days=1)
"""Writing or deleting a dataset, or writing a run, compacts the tables and removes old versions when the last
clean-up is older than this."""
KEEP_VERSIONS_FOR = timedelta(hours=1)
"""Table versions younger than this are kept by the clean-up, so a recent write can still be looked at or rolled
back; older versions, and files left by writes killed more than 7 days ago (LanceDB's own rule), are removed."""


class Maintenance:
    """The base of the workspace's own methods (datasets, runs, vectors: see `Workspace`), which read and write
    through `tables`."""

    uri: str
    path: Path
    root: Location
    db: lancedb.DBConnection
    tables: Tables

    def reclaim_space(self, keep_versions_for: timedelta = KEEP_VERSIONS_FOR) -> None:
        """Compacts every table and removes versions older than `keep_versions_for` with LanceDB's own optimize.

        Deleted rows only free their space once no kept version refers to them.
        """
        for name in self.db.list_tables().tables:
            self._optimize(name, keep_versions_for)
        (self.root / _MAINTENANCE_FILE).write_text(json.dumps({"reclaimed_at": now_iso()}))

    def compact(self, names: Sequence[str]) -> None:
        """Compacts these tables now and removes their versions older than KEEP_VERSIONS_FOR: after a labelling
        batch, which writes every few labels, a labelled run's tables stay near the size of their rows. Best effort,
        like the daily clean-up (a table with nothing to compact is left as it is, without a new version)."""
        for name in names:
            if self.tables.has(name):
                with contextlib.suppress(OSError, StoreError):
                    self._optimize(name, KEEP_VERSIONS_FOR)

    def _optimize(self, name: str, keep_versions_for: timedelta) -> None:
        table = self.db.open_table(name)
        retry(lambda: table.optimize(cleanup_older_than=keep_versions_for), self.uri)

    def _reclaim_space_if_due(self) -> None:
        """Called by the writers, after their write: the clean-up, when due, at most once a day."""
        if self._maintenance_due():
            with contextlib.suppress(OSError, StoreError):  # best effort: what was written stays written
                self.reclaim_space()

    def _maintenance_due(self) -> bool:
        try:
            last = datetime.fromisoformat(json.loads((self.root / _MAINTENANCE_FILE).read_text())["reclaimed_at"])
        except (OSError, ValueError, KeyError, TypeError):
            return self.tables.has("datasets")  # never cleaned up: due once there is something to clean
        return datetime.now(UTC) - last > MAINTENANCE_EVERY
