"""What a run's SAE makes: its sparse activations and its features' statistics."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from prisma_core.store.ids import check_id
from prisma_core.store.retry import retry
from prisma_core.store.schemas import SCHEMAS
from prisma_core.store.tables import Tables, reading

ACTIVATION_ROWS = 1_048_576
"""Activation rows `Activations.batches` reads at a time (16 MB)."""


@dataclass
class Activations:
    """`Workspace.activations`."""

    tables: Tables

    def save(self, run_id: str, positions: np.ndarray, features: np.ndarray, values: np.ndarray) -> None:
        """Sparse codes as (document position, feature, value) rows; zeros are never stored."""
        keep = values > 0
        self.tables.add(
            "activations",
            pa.table(
                {
                    "run_id": pa.array([run_id] * int(keep.sum()), pa.string()),
                    "position": pa.array(positions[keep], pa.int64()),
                    "feature_id": pa.array(features[keep], pa.int32()),
                    "value": pa.array(values[keep], pa.float32()),
                },
                schema=SCHEMAS["activations"],
            ),
        )

    def batches(self, run_id: str) -> tuple[int, Iterator[pa.RecordBatch]]:
        """The number of the run's activation rows and the rows (position, feature_id, value) at most ACTIVATION_ROWS
        at a time, in no set order: one scan that never holds the whole table (32 million rows at k = 32 for a million
        documents)."""
        where = f"run_id = '{check_id(run_id)}'"
        if not self.tables.has("activations"):
            return 0, iter(())
        table = self.tables.db.open_table("activations")
        query = table.search().where(where).select(["position", "feature_id", "value"])
        with reading("activations"):
            n_rows = table.count_rows(where)
        return n_rows, self.tables.batches("activations", query, ACTIVATION_ROWS)

    def remove_from(self, run_id: str, position: int) -> None:
        """Delete the run's activations of the documents at `position` and after (what a killed placement of added
        documents left)."""
        self.tables.delete("activations", f"run_id = '{check_id(run_id)}' AND position >= {int(position)}")


@dataclass
class FeatureStats:
    """`Workspace.feature_stats`: one row of statistics per feature of a run."""

    tables: Tables

    def save(self, run_id: str, stats: pd.DataFrame) -> None:
        frame = stats.assign(run_id=run_id)[SCHEMAS["features"].names]
        self.tables.add("features", pa.Table.from_pandas(frame, schema=SCHEMAS["features"], preserve_index=False))

    def update(self, run_id: str, stats: pd.DataFrame) -> None:
        """Replace the statistics of the run's features (those in `stats`) in one commit."""
        frame = stats.assign(run_id=run_id)[SCHEMAS["features"].names]
        rows = pa.Table.from_pandas(frame, schema=SCHEMAS["features"], preserve_index=False)
        merge = self.tables.table("features").merge_insert(["run_id", "feature_id"]).when_matched_update_all()
        retry(lambda: merge.execute(rows), self.tables.uri)

    def of(self, run_id: str) -> pd.DataFrame:
        """The run's feature statistics; `found_in` is empty (<NA>) for runs trained before it was recorded."""
        frame = self.tables.read("features", f"run_id = '{check_id(run_id)}'")
        frame = frame.astype({"found_in": "Int32"})
        return frame.drop(columns="run_id").sort_values("feature_id").reset_index(drop=True)
