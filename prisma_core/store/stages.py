"""Stage records: what each stage (ingest, embedding, training, keywords, themes, families, labelling) made from
what."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from prisma_core.store.ids import check_id
from prisma_core.store.schemas import StageRecord, json_fields
from prisma_core.store.tables import Tables

_STAGE_JSON = json_fields(StageRecord)

TRAINING_STAGE = "training"
"""The record of a run's SAE (its id is the run's): the SAE's and the embedding's settings and the SAE's metrics."""
AFTER_SAE_STAGES = ("keywords", "themes", "families")
"""A training's stages after its SAE, each leaving a record (parent: the training's) named as the run's settings
section its config is; their records are written before the training's. Runs trained before they had records hold
every section in the training's record."""
REBUILT_STAGES = ("families", "themes")
"""Stages a run redoes without retraining: the newest record of each holds the settings of what the run shows, and
its counts (`shown_counts`) are the run's."""


def shown_counts(summary: dict[str, Any]) -> dict[str, Any]:
    """What a themes or families record counts, as the run's metrics: without its seconds (the run's `seconds` are
    its SAE training's)."""
    return {name: value for name, value in summary.items() if name != "seconds"}


def rebuilt_counts(stages: Sequence[StageRecord]) -> dict[str, Any]:
    """What a run shows now, counted by the newest record of its families and of its themes (the training's or a
    rebuild's since) among its `stages` (oldest first)."""
    counts: dict[str, Any] = {}
    for stage in stages:
        if stage.stage in REBUILT_STAGES:
            counts |= shown_counts(stage.summary)
    return counts


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
