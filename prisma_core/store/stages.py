"""Stage records and the table registry: every stage's name, the tables whose rows it makes, and what each stage
made from what (its records).

The names and tables are declared here, in the store, because the store deletes and repairs runs and datasets by
them and sits below the stages; `prisma_core.pipeline.stages` pairs each name with its settings and its `run`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from prisma_core.store.ids import check_id
from prisma_core.store.schemas import StageRecord, json_fields
from prisma_core.store.tables import Tables

_STAGE_JSON = json_fields(StageRecord)

INGEST = "ingest"
"""Files read into a new dataset (its record's id is the dataset's)."""
APPEND = "append"
"""Documents added to a dataset."""
EMBEDDING = "embedding"
"""A dataset's vectors (and passages) in one embedding space."""
MAP = "map"
"""A dataset's documents drawn on a map, kept to be shown again; a cache, drawn again when missing: no record."""
TRAINING = "training"
"""The record of a run's SAE (its id is the run's): the SAE's and the embedding's settings and the SAE's metrics."""
KEYWORDS = "keywords"
"""The features' keyword labels."""
SUBTHEMES = "subthemes"
"""The level inside the themes (made with the themes, with their settings, and stored just before them)."""
THEMES = "themes"
FAMILIES = "families"
LABELLING = "labelling"
"""A batch of labels from a model: it names rows of the keywords', sub-themes', themes' and families' tables."""
PLACEMENT = "documents"
"""Documents added to a dataset placed in one of its runs (pipeline/placement.py): its newest record's summary holds
how many of the dataset's documents the run covers (`n_documents`). It adds rows to the training's tables."""
REPORT = "report"
"""A run's one-file HTML report, written outside the workspace."""
EXPORT = "export"
"""A run's plain files (Parquet, JSON, safetensors), written outside the workspace or in the app's exports folder."""

RECORDS = "stages"
"""The table every stage writes its record to."""
EDITS = "edits"
"""The analyst's edits of a run: written by the analyst, not by a stage."""
LOCKS = "locks"
"""The repair's lock."""

STAGE_TABLES: dict[str, tuple[str, ...]] = {
    INGEST: ("datasets", "documents"),
    APPEND: (),
    EMBEDDING: ("vectors", "passages"),  # one table per embedding space: `vectors__<space>`, `passages__v<n>__<space>`
    MAP: ("maps",),
    TRAINING: ("sae_runs", "activations", "features", "evidence"),
    KEYWORDS: ("interpretations",),
    SUBTHEMES: ("subthemes",),
    THEMES: ("themes",),
    FAMILIES: ("families",),
    LABELLING: (),
    PLACEMENT: (),
    REPORT: (),
    EXPORT: (),
}
"""The table registry: the tables whose rows each stage makes (each table is made by exactly one stage)."""

RUN_STAGES = (TRAINING, KEYWORDS, SUBTHEMES, THEMES, FAMILIES)
"""The stages whose tables hold a run's rows (by `run_id`)."""
AFTER_SAE_STAGES = RUN_STAGES[1:]
"""A training's stages after its SAE, each leaving a record (parent: the training's); their records are written
before the training's. Runs trained before they had records hold every section in the training's record."""
SETTINGS_STAGES = (KEYWORDS, THEMES, FAMILIES)
"""Stages whose record's config is the run's settings section of their name (the sub-themes are made with the
themes' settings)."""
REBUILT_STAGES = (FAMILIES, SUBTHEMES, THEMES)
"""Stages a run redoes without retraining: the newest record of each holds the settings of what the run shows, and
its counts (`shown_counts`) are the run's."""


def table_kind(name: str) -> str:
    """The registry's name of a stored table: one table per embedding space counts as one (`vectors__<space>`)."""
    return name.split("__")[0]


def tables_of(stages: Sequence[str]) -> tuple[str, ...]:
    return tuple(table for stage in stages for table in STAGE_TABLES[stage])


RUN_TABLES = (*tables_of(RUN_STAGES), RECORDS, EDITS)
"""Every table holding rows of a run (by `run_id`): its stages', their records and the analyst's edits."""


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


@dataclass
class StageRecords:
    """`Workspace.stage_records`: the stages table."""

    tables: Tables

    def add(self, record: StageRecord) -> None:
        """Written after the stage's artefacts (the record of a run's training just before the run record)."""
        row = asdict(record)
        self.tables.add(RECORDS, [row | {key: json.dumps(row[key]) for key in _STAGE_JSON}])

    def of(self, dataset_id: str, run_id: str | None = None) -> list[StageRecord]:
        """The dataset's stage records, oldest first; with `run_id`, of that run and of no other."""
        where = f"dataset_id = '{check_id(dataset_id)}'"
        if run_id is not None:
            where += f" AND (run_id = '{check_id(run_id)}' OR run_id = '')"
        return self.tables.records(RECORDS, where, StageRecord)
