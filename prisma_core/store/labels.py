"""The labels of a run's features (the interpretations table): keyword labels, a model's labels and their scores,
many per feature, at most one of them preferred."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa

from prisma_core.store.ids import check_id, now_iso
from prisma_core.store.retry import retry
from prisma_core.store.schemas import SCHEMAS
from prisma_core.store.tables import Tables


@dataclass
class Labels:
    """`Workspace.labels`."""

    tables: Tables

    def add(self, run_id: str, rows: Sequence[dict[str, Any]]) -> None:
        """Append interpretations (label, description, source, prompt_version, scores); many per feature."""
        defaults = {"description": "", "prompt_version": "", "score_embedding": None, "score_detection": None}
        stamped = [
            defaults
            | row
            | {
                "run_id": run_id,
                "interpretation_id": row.get("interpretation_id") or uuid.uuid4().hex[:12],
                "created_at": row.get("created_at") or now_iso(),
                "preferred": bool(row.get("preferred", False)),
            }
            for row in rows
        ]
        self.tables.add("interpretations", stamped)

    def of(self, run_id: str) -> pd.DataFrame:
        return self.tables.read("interpretations", f"run_id = '{check_id(run_id)}'").drop(columns="run_id")

    def set_scores(self, run_id: str, scores: dict[str, dict[str, float]]) -> None:
        """scores: interpretation_id -> {score_embedding: ..., score_detection: ...}.

        One commit per set of score columns (a partial merge-insert), not one per interpretation: scoring every
        label of a run takes well under a second instead of minutes.
        """
        table = self.tables.table("interpretations")
        by_columns: dict[tuple[str, ...], list[str]] = {}
        for interpretation_id, values in scores.items():
            by_columns.setdefault(tuple(sorted(values)), []).append(check_id(interpretation_id))
        for columns, ids in by_columns.items():
            fields = [SCHEMAS["interpretations"].field(name) for name in ("run_id", "interpretation_id", *columns)]
            rows = pa.table(
                {
                    "run_id": [check_id(run_id)] * len(ids),
                    "interpretation_id": ids,
                    **{column: [scores[i][column] for i in ids] for column in columns},
                },
                schema=pa.schema(fields),
            )
            merge = table.merge_insert(["run_id", "interpretation_id"]).when_matched_update_all()
            retry(lambda merge=merge, rows=rows: merge.execute(rows), self.tables.uri)

    def prefer(self, run_id: str, feature_id: int, interpretation_id: str) -> None:
        table = self.tables.table("interpretations")
        feature = f"run_id = '{check_id(run_id)}' AND feature_id = {int(feature_id)}"
        retry(lambda: table.update(where=feature, values={"preferred": False}), self.tables.uri)
        chosen = f"{feature} AND interpretation_id = '{check_id(interpretation_id)}'"
        retry(lambda: table.update(where=chosen, values={"preferred": True}), self.tables.uri)

    def clear_preference(self, run_id: str, feature_id: int) -> None:
        """No interpretation of the feature is preferred: it shows its newest LLM label, else its keywords."""
        table = self.tables.table("interpretations")
        feature = f"run_id = '{check_id(run_id)}' AND feature_id = {int(feature_id)}"
        retry(lambda: table.update(where=feature, values={"preferred": False}), self.tables.uri)
