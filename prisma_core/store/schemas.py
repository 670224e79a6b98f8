"""The tables of a workspace and the records read from them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

SCHEMAS: dict[str, pa.Schema] = {
    "datasets": pa.schema(
        [
            ("dataset_id", pa.string()),
            ("name", pa.string()),
            ("created_at", pa.string()),
            ("n_documents", pa.int64()),
            ("sources", pa.string()),
            ("report", pa.string()),
            ("metadata_columns", pa.string()),
        ]
    ),
    "documents": pa.schema(
        [
            ("dataset_id", pa.string()),
            ("position", pa.int64()),
            ("doc_id", pa.string()),
            ("title", pa.string()),
            ("text", pa.string()),
            ("text_hash", pa.string()),
            ("metadata", pa.string()),
        ]
    ),
    "sae_runs": pa.schema(
        [
            ("run_id", pa.string()),
            ("dataset_id", pa.string()),
            ("created_at", pa.string()),
            ("embedding_key", pa.string()),
            ("config", pa.string()),
            ("metrics", pa.string()),
            ("history", pa.string()),
            ("weights_dir", pa.string()),
            ("versions", pa.string()),
        ]
    ),
    "activations": pa.schema(
        [
            ("run_id", pa.string()),
            ("position", pa.int64()),
            ("feature_id", pa.int32()),
            ("value", pa.float32()),
        ]
    ),
    "features": pa.schema(
        [
            ("run_id", pa.string()),
            ("feature_id", pa.int32()),
            ("density", pa.int64()),
            ("density_fraction", pa.float64()),
            ("mean_activation", pa.float64()),
            ("max_activation", pa.float64()),
        ]
    ),
    "interpretations": pa.schema(
        [
            ("run_id", pa.string()),
            ("feature_id", pa.int32()),
            ("interpretation_id", pa.string()),
            ("label", pa.string()),
            ("description", pa.string()),
            ("source", pa.string()),
            ("prompt_version", pa.string()),
            ("created_at", pa.string()),
            ("score_embedding", pa.float64()),
            ("score_detection", pa.float64()),
            ("preferred", pa.bool_()),
        ]
    ),
    "families": pa.schema(
        [
            ("run_id", pa.string()),
            ("generation", pa.int32()),
            ("family_id", pa.int32()),
            ("iteration", pa.int32()),
            ("parent", pa.int32()),
            ("members", pa.string()),
            ("edges", pa.string()),
            ("label", pa.string()),
            ("label_source", pa.string()),
        ]
    ),
    "themes": pa.schema(
        [
            ("run_id", pa.string()),
            ("generation", pa.int32()),
            ("theme_id", pa.int32()),
            ("label", pa.string()),
            ("description", pa.string()),
            ("label_source", pa.string()),
            ("n_documents", pa.int64()),
            ("features", pa.string()),
            ("evidence", pa.list_(pa.float32())),
        ]
    ),
    "stages": pa.schema(
        [
            ("record_id", pa.string()),
            ("stage", pa.string()),
            ("parent_id", pa.string()),
            ("dataset_id", pa.string()),
            ("run_id", pa.string()),
            ("created_at", pa.string()),
            ("config", pa.string()),
            ("summary", pa.string()),
            ("versions", pa.string()),
        ]
    ),
}


@dataclass(frozen=True)
class DatasetRecord:
    dataset_id: str
    name: str
    created_at: str
    n_documents: int
    sources: list[str]
    report: dict[str, Any]
    metadata_columns: list[str]


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    dataset_id: str
    created_at: str
    embedding_key: str
    config: dict[str, Any]
    metrics: dict[str, Any]
    history: list[dict[str, Any]]
    weights_dir: str
    versions: dict[str, str]


@dataclass(frozen=True)
class StageRecord:
    """What one stage made from what: written after the stage's artefacts, so a stage that crashed leaves none."""

    record_id: str
    stage: str  # ingest, embedding, training, families, themes, labelling
    parent_id: str  # the record it was made from: dataset -> embedding -> run -> families, themes, labels
    dataset_id: str
    run_id: str  # "" for the stages before a run
    created_at: str
    config: dict[str, Any]  # the settings that made it (never secrets)
    summary: dict[str, Any]  # what it made: counts, keys
    versions: dict[str, str]
