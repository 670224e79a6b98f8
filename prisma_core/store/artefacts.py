"""What a run derives: sparse activations, feature statistics, interpretations, families and themes."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from prisma_core.store.ids import check_id, now_iso
from prisma_core.store.retry import retry
from prisma_core.store.schemas import SCHEMAS, GroupLabel, NamedFamily
from prisma_core.store.tables import Tables, reading

ACTIVATION_ROWS = 1_048_576
"""Activation rows `Artefacts.activation_batches` reads at a time (16 MB)."""


class Artefacts(Tables):
    def save_activations(self, run_id: str, positions: np.ndarray, features: np.ndarray, values: np.ndarray) -> None:
        """Sparse codes as (document position, feature, value) rows; zeros are never stored."""
        keep = values > 0
        self._add(
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

    def activation_batches(self, run_id: str) -> tuple[int, Iterator[pa.RecordBatch]]:
        """The number of the run's activation rows and the rows (position, feature_id, value) at most ACTIVATION_ROWS
        at a time, in no set order: one scan that never holds the whole table (32 million rows at k = 32 for a million
        documents)."""
        where = f"run_id = '{check_id(run_id)}'"
        if not self._has_table("activations"):
            return 0, iter(())
        table = self.db.open_table("activations")
        query = table.search().where(where).select(["position", "feature_id", "value"])
        with reading("activations"):
            n_rows = table.count_rows(where)
        return n_rows, self._batches("activations", query, ACTIVATION_ROWS)

    def save_features(self, run_id: str, stats: pd.DataFrame) -> None:
        frame = stats.assign(run_id=run_id)[SCHEMAS["features"].names]
        self._add("features", pa.Table.from_pandas(frame, schema=SCHEMAS["features"], preserve_index=False))

    def update_features(self, run_id: str, stats: pd.DataFrame) -> None:
        """Replace the statistics of the run's features (those in `stats`) in one commit."""
        frame = stats.assign(run_id=run_id)[SCHEMAS["features"].names]
        rows = pa.Table.from_pandas(frame, schema=SCHEMAS["features"], preserve_index=False)
        merge = self._table("features").merge_insert(["run_id", "feature_id"]).when_matched_update_all()
        retry(lambda: merge.execute(rows), self.uri)

    def remove_activations_from(self, run_id: str, position: int) -> None:
        """Delete the run's activations of the documents at `position` and after (what a killed placement of added
        documents left)."""
        self._delete("activations", f"run_id = '{check_id(run_id)}' AND position >= {int(position)}")

    def features(self, run_id: str) -> pd.DataFrame:
        """The run's feature statistics; `found_in` is empty (<NA>) for runs trained before it was recorded."""
        frame = self._read("features", f"run_id = '{check_id(run_id)}'")
        frame = frame.astype({"found_in": "Int32"})
        return frame.drop(columns="run_id").sort_values("feature_id").reset_index(drop=True)

    def add_interpretations(self, run_id: str, rows: Sequence[dict[str, Any]]) -> None:
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
        self._add("interpretations", stamped)

    def interpretations(self, run_id: str) -> pd.DataFrame:
        return self._read("interpretations", f"run_id = '{check_id(run_id)}'").drop(columns="run_id")

    def set_interpretation_scores(self, run_id: str, scores: dict[str, dict[str, float]]) -> None:
        """scores: interpretation_id -> {score_embedding: ..., score_detection: ...}.

        One commit per set of score columns (a partial merge-insert), not one per interpretation: scoring every
        label of a run takes well under a second instead of minutes.
        """
        table = self._table("interpretations")
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
            retry(lambda merge=merge, rows=rows: merge.execute(rows), self.uri)

    def prefer_interpretation(self, run_id: str, feature_id: int, interpretation_id: str) -> None:
        table = self._table("interpretations")
        feature = f"run_id = '{check_id(run_id)}' AND feature_id = {int(feature_id)}"
        retry(lambda: table.update(where=feature, values={"preferred": False}), self.uri)
        chosen = f"{feature} AND interpretation_id = '{check_id(interpretation_id)}'"
        retry(lambda: table.update(where=chosen, values={"preferred": True}), self.uri)

    def clear_preference(self, run_id: str, feature_id: int) -> None:
        """No interpretation of the feature is preferred: it shows its newest LLM label, else its keywords."""
        table = self._table("interpretations")
        feature = f"run_id = '{check_id(run_id)}' AND feature_id = {int(feature_id)}"
        retry(lambda: table.update(where=feature, values={"preferred": False}), self.uri)

    def save_families(self, run_id: str, families: Sequence[NamedFamily]) -> None:
        """Replace a run's families (see `_replace_generation`)."""
        self._replace_generation(
            "families",
            run_id,
            "family_id",
            [
                asdict(family)
                | {
                    "members": json.dumps([int(m) for m in family.members]),
                    "edges": json.dumps([[int(p), int(c), float(w)] for p, c, w in family.edges]),
                }
                for family in families
            ],
        )

    def families(self, run_id: str) -> list[NamedFamily]:
        """A run's families as last stored, in id order."""
        return [
            NamedFamily(
                family_id=int(row["family_id"]),
                iteration=int(row["iteration"]),
                parent=int(row["parent"]),
                members=[int(m) for m in json.loads(row["members"])],
                edges=[(int(p), int(c), float(w)) for p, c, w in json.loads(row["edges"])],
                label=row["label"],
                label_source=row["label_source"],
            )
            for row in self._latest_generation("families", run_id, "family_id")
        ]

    def save_themes(self, run_id: str, rows: Sequence[dict[str, Any]]) -> None:
        """Replace a run's themes: theme_id, label, description, label_source, n_documents, features (ids),
        evidence (one weight per feature), probabilities (the theme's probability for every document, in position
        order)."""
        self._replace_generation(
            "themes",
            run_id,
            "theme_id",
            [
                row
                | {
                    "features": json.dumps([int(f) for f in row["features"]]),
                    "evidence": [float(e) for e in row["evidence"]],
                    "probabilities": np.asarray(row["probabilities"], np.float32),
                }
                for row in rows
            ],
        )

    def themes(self, run_id: str) -> list[dict[str, Any]]:
        """A run's themes, theme 0 first; empty for runs made before themes existed. `probabilities` is None for
        themes stored before the documents' probabilities were."""
        return [
            {
                **row,
                "features": json.loads(row["features"]),
                "evidence": np.asarray(row["evidence"], np.float32),
                "probabilities": _float_array_or_none(row["probabilities"]),
            }
            for row in self._latest_generation("themes", run_id, "theme_id")
        ]

    def save_subthemes(self, run_id: str, rows: Sequence[dict[str, Any]]) -> None:
        """Replace a run's sub-themes: subtheme_id, theme_id (the theme it belongs to), label, description,
        label_source, n_documents, features (ids), evidence (one weight per feature), documents (positions)."""
        self._replace_generation(
            "subthemes",
            run_id,
            "subtheme_id",
            [
                row
                | {
                    "features": json.dumps([int(f) for f in row["features"]]),
                    "evidence": [float(e) for e in row["evidence"]],
                    "documents": np.asarray(row["documents"], np.int32),
                }
                for row in rows
            ],
        )

    def subthemes(self, run_id: str) -> list[dict[str, Any]]:
        """A run's sub-themes, sub-theme 0 first; empty for runs made before sub-themes existed."""
        return [
            {
                **row,
                "features": json.loads(row["features"]),
                "evidence": np.asarray(row["evidence"], np.float32),
                "documents": np.asarray(row["documents"], np.int32),
            }
            for row in self._latest_generation("subthemes", run_id, "subtheme_id")
        ]

    def label_groups(self, name: str, run_id: str, key: str, members_key: str, labels: Sequence[GroupLabel]) -> None:
        """Name groups (rows of "families" or "themes", `key` their id column, `members_key` their members column)
        that still hold the members they were named from, in one commit that changes their label and label_source
        only: the set is never rewritten, so a rebuild that landed meanwhile is kept whole (its groups with other
        members keep their own labels)."""
        if not labels:
            return
        table = self._table(name)
        fields = [SCHEMAS[name].field(column) for column in ("run_id", key, members_key, "label", "label_source")]
        rows = pa.table(
            {
                "run_id": [check_id(run_id)] * len(labels),
                key: [label.group_id for label in labels],
                members_key: [json.dumps([int(m) for m in label.members]) for label in labels],
                "label": [label.label for label in labels],
                "label_source": [label.source for label in labels],
            },
            schema=pa.schema(fields),
        )
        same_members = f"target.{members_key} = source.{members_key}"
        merge = table.merge_insert(["run_id", key]).when_matched_update_all(where=same_members)
        retry(lambda: merge.execute(rows), self.uri)

    def _replace_generation(self, name: str, run_id: str, key: str, rows: Sequence[dict[str, Any]]) -> None:
        """Replace a run's rows of a table in one commit: the new generation is inserted and the old one deleted
        together.

        Two rebuilds at once (two sessions, the app and the CLI) are two merges; LanceDB applies them one after the
        other, so exactly one complete set survives and a reader never sees a mix or an empty set in between.
        """
        where = f"run_id = '{check_id(run_id)}'"
        old = self._read(name, where, ["generation"])["generation"]
        generation = int(old.max()) + 1 if len(old) else 0
        table = self._table(name)
        new = pa.Table.from_pylist(
            [row | {"run_id": run_id, "generation": generation} for row in rows], schema=table.schema
        )
        merge = (
            table.merge_insert(["run_id", "generation", key])
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .when_not_matched_by_source_delete(where)
        )
        retry(lambda: merge.execute(new), self.uri)

    def _latest_generation(self, name: str, run_id: str, order: str) -> list[dict[str, Any]]:
        frame = self._read(name, f"run_id = '{check_id(run_id)}'")
        frame = frame[frame["generation"] == frame["generation"].max()].sort_values(order)
        return frame.drop(columns=["run_id", "generation"]).to_dict(orient="records")


def _float_array_or_none(value: Any) -> np.ndarray | None:
    """A stored list of floats as float32, None where the row has none (a null, or a table made before the column
    was: NaN after the read fills it in)."""
    return np.asarray(value, np.float32) if isinstance(value, list | np.ndarray) else None
