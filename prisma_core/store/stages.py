"""Stage records: what each stage (ingest, embedding, training, families, themes, labelling) made from what."""

from __future__ import annotations

import json
from dataclasses import asdict

from prisma_core.store.ids import check_id
from prisma_core.store.schemas import StageRecord, json_fields
from prisma_core.store.tables import Tables

_STAGE_JSON = json_fields(StageRecord)


class Stages(Tables):
    def add_stage(self, record: StageRecord) -> None:
        """Written after the stage's artefacts (the record of a run's training just before the run record)."""
        row = asdict(record)
        self._add("stages", [row | {key: json.dumps(row[key]) for key in _STAGE_JSON}])

    def stages(self, dataset_id: str, run_id: str | None = None) -> list[StageRecord]:
        """The dataset's stage records, oldest first; with `run_id`, of that run and of no other."""
        where = f"dataset_id = '{check_id(dataset_id)}'"
        if run_id is not None:
            where += f" AND (run_id = '{check_id(run_id)}' OR run_id = '')"
        return self._records("stages", where, StageRecord)
