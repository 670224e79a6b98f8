"""The analyst's edits of a run (renames, merges, hidden and pinned concepts): one row per edit, only ever added."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from prisma_core.store.ids import check_id
from prisma_core.store.schemas import EditRecord, json_fields
from prisma_core.store.tables import Tables

_EDIT_JSON = json_fields(EditRecord)


@dataclass
class Edits:
    """`Workspace.edits`."""

    tables: Tables

    def add(self, records: list[EditRecord]) -> None:
        """Stores edits in one commit."""
        rows = [asdict(record) for record in records]
        self.tables.add("edits", [row | {key: json.dumps(row[key]) for key in _EDIT_JSON} for row in rows])

    def of(self, run_id: str) -> list[EditRecord]:
        """Every edit of the run, undos included, oldest first."""
        return self.tables.records("edits", f"run_id = '{check_id(run_id)}'", EditRecord)
