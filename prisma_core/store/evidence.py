"""A run's evidence passages: for each feature, the passages where it fires most (`prisma_core.concepts.evidence`), one
row per feature holding them strongest first."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from prisma_core.store.tables import Tables

EVIDENCE_COLUMNS = ["feature_id", "rank", "position", "number", "start", "end", "value"]
"""A run's evidence as read: one row per passage, by feature, strongest first (`rank` 0, 1, ...)."""
_LISTS = {"positions": "position", "numbers": "number", "starts": "start", "ends": "end", "values": "value"}


@dataclass
class Evidence:
    """`Workspace.evidence`."""

    tables: Tables

    def save(self, run_id: str, evidence: pd.DataFrame, n_features: int) -> None:
        """Replace the run's evidence (rows as EVIDENCE_COLUMNS) in one commit: a row for every feature, an empty one
        for a feature without passages, so a run whose evidence was found is told from one never searched."""
        ordered = evidence.sort_values(["feature_id", "rank"])
        by_feature = dict(tuple(ordered.groupby("feature_id")))
        empty = ordered.iloc[:0]
        rows = []
        for feature in range(n_features):
            found = by_feature.get(feature, empty)
            rows.append(
                {"feature_id": feature}
                | {
                    stored: found[column].to_numpy(np.float32 if column == "value" else np.int32)
                    for stored, column in _LISTS.items()
                }
            )
        self.tables.replace_generation("evidence", run_id, "feature_id", rows)

    def of(self, run_id: str) -> pd.DataFrame | None:
        """The run's evidence (EVIDENCE_COLUMNS), None when it was never stored (a run trained before it existed)."""
        rows = self.tables.latest_generation("evidence", run_id, "feature_id")
        if not rows:
            return None
        parts = [
            pd.DataFrame({column: np.asarray(row[stored]) for stored, column in _LISTS.items()}).assign(
                feature_id=int(row["feature_id"])
            )
            for row in rows
        ]
        frame = pd.concat(parts, ignore_index=True)
        frame["rank"] = frame.groupby("feature_id").cumcount()
        return frame.astype(
            {"feature_id": np.int32, "rank": np.int32, "position": np.int64, "number": np.int32}
            | {"start": np.int64, "end": np.int64, "value": np.float32}
        )[EVIDENCE_COLUMNS]
