"""A run's groups of features: its families, themes and sub-themes, each set replaced whole by a rebuild (a new
generation of rows), each group named in place by a labelling."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from prisma_core.store.ids import check_id
from prisma_core.store.retry import retry
from prisma_core.store.schemas import SCHEMAS, GroupLabel, NamedFamily
from prisma_core.store.tables import Tables


@dataclass
class Groups:
    """`Workspace.groups`."""

    tables: Tables

    def save_families(self, run_id: str, families: Sequence[NamedFamily]) -> None:
        """Replace a run's families (see `Tables.replace_generation`)."""
        self.tables.replace_generation(
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
            for row in self.tables.latest_generation("families", run_id, "family_id")
        ]

    def save_themes(self, run_id: str, rows: Sequence[dict[str, Any]]) -> None:
        """Replace a run's themes: theme_id, label, description, label_source, n_documents, features (ids),
        evidence (one weight per feature), probabilities (the theme's probability for every document, in position
        order)."""
        self.tables.replace_generation(
            "themes",
            run_id,
            "theme_id",
            [
                row | _stored_members(row) | {"probabilities": np.asarray(row["probabilities"], np.float32)}
                for row in rows
            ],
        )

    def themes(self, run_id: str) -> list[dict[str, Any]]:
        """A run's themes, theme 0 first; empty for runs made before themes existed. `probabilities` is None for
        themes stored before the documents' probabilities were."""
        return [
            row | _read_members(row) | {"probabilities": _float_array_or_none(row["probabilities"])}
            for row in self.tables.latest_generation("themes", run_id, "theme_id")
        ]

    def save_subthemes(self, run_id: str, rows: Sequence[dict[str, Any]]) -> None:
        """Replace a run's sub-themes: subtheme_id, theme_id (the theme it belongs to), label, description,
        label_source, n_documents, features (ids), evidence (one weight per feature), documents (positions)."""
        self.tables.replace_generation(
            "subthemes",
            run_id,
            "subtheme_id",
            [row | _stored_members(row) | {"documents": np.asarray(row["documents"], np.int32)} for row in rows],
        )

    def subthemes(self, run_id: str) -> list[dict[str, Any]]:
        """A run's sub-themes, sub-theme 0 first; empty for runs made before sub-themes existed."""
        return [
            row | _read_members(row) | {"documents": np.asarray(row["documents"], np.int32)}
            for row in self.tables.latest_generation("subthemes", run_id, "subtheme_id")
        ]

    def label(self, name: str, run_id: str, key: str, members_key: str, labels: Sequence[GroupLabel]) -> None:
        """Name groups (rows of "families" or "themes", `key` their id column, `members_key` their members column)
        that still hold the members they were named from, in one commit that changes their label and label_source
        only: the set is never rewritten, so a rebuild that landed meanwhile is kept whole (its groups with other
        members keep their own labels)."""
        if not labels:
            return
        table = self.tables.table(name)
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
        retry(lambda: merge.execute(rows), self.tables.uri)


def _float_array_or_none(value: Any) -> np.ndarray | None:
    """A stored list of floats as float32, None where the row has none (a null, or a table made before the column
    was: NaN after the read fills it in)."""
    return np.asarray(value, np.float32) if isinstance(value, list | np.ndarray) else None


def _stored_members(row: dict[str, Any]) -> dict[str, Any]:
    """A theme's or sub-theme's features (ids, as JSON) and evidence (one weight per feature), as stored."""
    return {"features": json.dumps([int(f) for f in row["features"]]), "evidence": [float(e) for e in row["evidence"]]}


def _read_members(row: dict[str, Any]) -> dict[str, Any]:
    return {"features": json.loads(row["features"]), "evidence": np.asarray(row["evidence"], np.float32)}
