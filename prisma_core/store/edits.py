"""The analyst's edits of a run (renames, merges, hidden and pinned concepts): one row per edit, only ever added."""

from __future__ import annotations

import json
from dataclasses import asdict

from prisma_core.store.ids import check_id
from prisma_core.store.schemas import EditRecord, json_fields
from prisma_core.store.tables import Tables

_EDIT_JSON = json_fields(EditRecord)


class Edits(Tables):
    def add_edits(self, records: list[EditRecord]) -> None:
        """Stores edits in one commit."""
        rows = [asdict(record) for record in records]
        self._add("edits", [row | {key: json.dumps(row[key]) for key in _EDIT_JSON} for row in rows])

    def edits(self, run_id: str) -> list[EditRecord]:
        """Every edit of the run, undos included, oldest first."""
        return self._records("edits", f"run_id = '{check_id(run_id)}'", EditRecord)
