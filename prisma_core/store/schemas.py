"""The tables of a workspace and the records read from them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pyarrow as pa

KEYWORD_SOURCE = "keywords"
"""The `source` of labels made from distinctive keywords (an LLM's labels carry the model's name)."""
MANUAL_SOURCE = "manual"
"""The `source` of labels the analyst wrote."""

_TYPES = {
    "str": pa.string(),
    "int64": pa.int64(),
    "int32": pa.int32(),
    "float64": pa.float64(),
    "float32": pa.float32(),
    "bool": pa.bool_(),
    "float32s": pa.list_(pa.float32()),
    "int32s": pa.list_(pa.int32()),
}
"""The column types a declaration names; a record's JSON fields (dicts, lists) are stored as strings."""


def _schema(columns: str) -> pa.Schema:
    """The schema of "name:type name:type ..." (types of `_TYPES`; a column without one is a string)."""
    pairs = [column.partition(":") for column in columns.split()]
    return pa.schema([(name, _TYPES[kind or "str"]) for name, _, kind in pairs])


def _record_schema(record_type: type) -> pa.Schema:
    """The schema of a record dataclass's table: a column per field, in order; an int is an int64, a str a string
    and anything else JSON in a string (`json_fields`)."""
    return pa.schema(
        [(field.name, pa.int64() if field.type == "int" else pa.string()) for field in fields(record_type)]
    )


def json_fields(record_type: type) -> tuple[str, ...]:
    """The fields of a record stored as JSON text: all but its ints and strings."""
    return tuple(field.name for field in fields(record_type) if field.type not in ("int", "str"))


@dataclass(frozen=True)
class DatasetRecord:
    dataset_id: str
    name: str
    created_at: str
    n_documents: int
    sources: list[str]
    report: dict[str, Any]
    metadata_columns: list[str]
    writer: str = ""  # the process adding documents to it while it does (`Datasets.adding_documents`), else ""


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
    stage: str  # ingest, append, embedding, training, keywords, themes, families, labelling, documents (placed)
    parent_id: str  # the record it was made from: dataset -> embedding -> run -> keywords, themes, families, labels
    dataset_id: str
    run_id: str  # "" for the stages before a run
    created_at: str
    config: dict[str, Any]  # the settings that made it (never secrets)
    summary: dict[str, Any]  # what it made: counts, keys
    versions: dict[str, str]


@dataclass(frozen=True)
class EditRecord:
    """One change an analyst made to how a run shows its concepts (see `prisma_core.curation.edits`): rows are only ever
    added, so an edit is undone by a later record naming it, and nothing an analyst did is lost."""

    edit_id: str
    run_id: str
    created_at: str  # to the microsecond: edits made in the same second keep their order
    author: str  # who made it: the operating-system user of the app or the command line
    action: str  # rename, merge, hide, pin, undo
    level: str  # theme, subtheme, family, feature ("" for an undo)
    target: int  # the concept's id at its level (-1 for an undo)
    value: dict[str, Any]  # what the edit says: name, description, merged ids, the members it was made on
    undoes: str  # the edit_id an undo cancels ("" otherwise)
    carried_from: str  # "run_id/edit_id" of the edit it was carried over from after a new training ("" otherwise)


@dataclass(frozen=True)
class Family:
    """A family of features found by `prisma_core.concepts.families.find_families`: a parent and its descendants."""

    family_id: int
    iteration: int
    """0-based round that found the family."""
    parent: int
    """Root feature id."""
    members: list[int]
    """Feature ids in DFS preorder from the parent, parent first, siblings in ascending id order."""
    edges: list[tuple[int, int, float]]
    """(parent, child, weight) directed tree edges inside the family, in DFS order."""


@dataclass(frozen=True)
class NamedFamily(Family):
    """A stored family with the name it shows (what `Groups.families` returns)."""

    label: str
    """Its name: keywords at first, then a model's or the analyst's."""
    label_source: str
    """Who named it: `KEYWORD_SOURCE`, a model's name, or the analyst."""


@dataclass(frozen=True)
class GroupLabel:
    """A name given to a family or a theme, for the members it was given for (see `Groups.label`)."""

    group_id: int
    members: list[int]
    label: str
    source: str  # who named it: a model's name


@dataclass(frozen=True, eq=False)  # arrays: compared field by field, not with ==
class Passages:
    """Passages of documents (how they are cut and pooled: `prisma_core.embed.passages`), one row per passage, ordered
    by document, then passage number."""

    position: np.ndarray
    """[m] int64: the document's position in its dataset (or the text's index in the texts given)."""
    number: np.ndarray
    """[m] int32: the passage's number in its document, 0, 1, ... in the order of the text."""
    start: np.ndarray
    """[m] int64: where the passage starts in the document's text (a character index) ..."""
    end: np.ndarray
    """[m] int64: ... and where it ends: `text[start:end]` is the passage, from its first word to its last."""
    n_tokens: np.ndarray
    """[m] int32: its tokens (the model's word pieces)."""
    vectors: np.ndarray
    """[m, d] float32: its vector, in the documents' vector space."""

    def __len__(self) -> int:
        return len(self.position)

    def take(self, rows: np.ndarray) -> Passages:
        """These rows (indices or a mask), in the order given."""
        return Passages(*(getattr(self, field.name)[rows] for field in fields(self)))


def concatenate_passages(parts: Sequence[Passages], dim: int) -> Passages:
    """The rows of every part, one part after the other (no rows in any: no passage, vectors [0, dim])."""
    parts = [part for part in parts if len(part)]
    if not parts:
        return Passages(
            np.zeros(0, np.int64),
            np.zeros(0, np.int32),
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
            np.zeros(0, np.int32),
            np.zeros((0, dim), np.float32),
        )
    return Passages(*(np.concatenate([getattr(part, field.name) for part in parts]) for field in fields(Passages)))


SCHEMAS: dict[str, pa.Schema] = {
    "datasets": _record_schema(DatasetRecord),
    "documents": _schema("dataset_id position:int64 doc_id title text text_hash metadata"),
    "sae_runs": _record_schema(RunRecord),
    "activations": _schema("run_id position:int64 feature_id:int32 value:float32"),
    "features": _schema(
        "run_id feature_id:int32 density:int64 density_fraction:float64 mean_activation:float64 max_activation:float64 "
        "found_in:int32"
    ),
    "interpretations": _schema(
        "run_id feature_id:int32 interpretation_id label description source prompt_version created_at "
        "score_embedding:float64 score_detection:float64 preferred:bool"
    ),
    "families": _schema(
        "run_id generation:int32 family_id:int32 iteration:int32 parent:int32 members edges label label_source"
    ),
    "themes": _schema(
        "run_id generation:int32 theme_id:int32 label description label_source n_documents:int64 features "
        "evidence:float32s probabilities:float32s"
    ),
    "subthemes": _schema(
        "run_id generation:int32 subtheme_id:int32 theme_id:int32 label description label_source n_documents:int64 "
        "features evidence:float32s documents:int32s"
    ),
    "evidence": _schema(
        "run_id generation:int32 feature_id:int32 positions:int32s numbers:int32s starts:int32s ends:int32s "
        "values:float32s"
    ),
    "stages": _record_schema(StageRecord),
    "edits": _record_schema(EditRecord),
    "maps": _schema("dataset_id embedding_key position:int64 x:float32 y:float32"),
    "locks": _schema("name holder"),
}
"""Every table of a workspace: its columns in stored order."""
