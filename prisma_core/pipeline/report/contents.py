"""What the report is made from: the run as its caller loaded it, the dataset, its documents and metadata, the map
of the documents, the groups to compare and the periods of a date column (the report's sections read it; none of them
reads the store again)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pandas as pd

from prisma_core.compare.groups import group_values, pooled, useful_columns
from prisma_core.errors import NotFoundError
from prisma_core.pipeline.evidence import feature_quotes
from prisma_core.pipeline.report.config import ReportConfig
from prisma_core.pipeline.trends import column_timeline
from prisma_core.reading.explore import DatasetDocuments, document_map
from prisma_core.reading.runs import LoadedRun
from prisma_core.store import DatasetRecord, Workspace
from prisma_core.trends.periods import Timeline, dated_column

EVIDENCE_FEATURES = 4
"""Concepts of each theme whose passages the report quotes."""
EVIDENCE_QUOTES = 2
"""Passages quoted for each of them."""


@dataclass(frozen=True)
class ReportContents:
    config: ReportConfig
    dataset: DatasetRecord
    run: LoadedRun
    documents: DatasetDocuments
    map_points: pd.DataFrame  # position, x, y of the documents drawn on the map
    column: str | None  # the metadata column compared (None: the dataset has none)
    groups: pd.Series | None  # each document's group in that column (dates bucketed, the smallest groups pooled)
    date_column: str | None  # the column of dates the themes are followed over (None: the dataset has none)
    timeline: Timeline | None  # its periods
    evidence: (
        pd.DataFrame
    )  # the passages quoted for the concepts shown (`evidence_features`), `pipeline.feature_quotes`
    written_at: str  # when the report was written (UTC, ISO 8601)


def gather(
    workspace: Workspace, run: LoadedRun, config: ReportConfig, map_points: pd.DataFrame | None = None
) -> ReportContents:
    """The contents of a run's report. map_points: the map the caller already has (the app's), else it is drawn
    here from a sample of config.map_points documents."""
    dataset = workspace.dataset(run.record.dataset_id)
    metadata = workspace.metadata(dataset.dataset_id)
    column = compared_column(metadata, config.column)
    groups = None if column is None else pooled(group_values(metadata[column], config.date_bucket))
    date_column = dated_column(metadata, config.date_column)
    line = None if date_column is None else column_timeline(metadata, date_column, config.period)
    if map_points is None:
        vectors = workspace.stored_vectors(dataset.dataset_id, run.record.embedding_key)
        map_points = document_map(vectors, max_points=config.map_points)
    return ReportContents(
        config=config,
        dataset=dataset,
        run=run,
        documents=DatasetDocuments.open(workspace, dataset.dataset_id),
        map_points=map_points,
        column=column,
        groups=groups,
        date_column=date_column,
        timeline=line,
        evidence=feature_quotes(workspace, run, evidence_features(run), EVIDENCE_QUOTES),
        written_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )


def evidence_features(run: LoadedRun) -> list[int]:
    """The concepts whose passages the report quotes: each theme's first EVIDENCE_FEATURES features (the densest
    features when the run has no themes), those the analyst hid and those that never fire left out."""
    shown = run.features[~run.features["hidden"] & (run.features["density"] > 0)]
    if run.theme_info.empty:
        return shown.sort_values("density", ascending=False)["feature_id"].head(EVIDENCE_FEATURES).tolist()
    listed = [int(f) for features in run.theme_info["features"] for f in list(features)[:EVIDENCE_FEATURES]]
    return [f for f in dict.fromkeys(listed) if f in set(shown["feature_id"])]


def compared_column(metadata: pd.DataFrame, chosen: str | None) -> str | None:
    """The column chosen, else the first that makes useful groups (None when the dataset has no metadata)."""
    if chosen is not None:
        if chosen not in metadata.columns:
            offered = ", ".join(map(str, metadata.columns)) or "none"
            raise NotFoundError(f"The dataset has no column “{chosen}” to compare groups by (its columns: {offered}).")
        return chosen
    useful = useful_columns(metadata)
    return useful[0] if useful else None
