"""One LanceDB database per workspace folder: datasets, documents, vectors, SAE runs and everything derived.

The store owns ids and run records. Artefacts are written first and the run record last, so a run that crashed
half-way never shows up as complete. Every write is a LanceDB commit (a new table version): a failed write leaves
the previous version readable.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import lancedb
import numpy as np
import pandas as pd
import pyarrow as pa

from prisma_core.errors import NotFoundError, StoreError

WORKSPACE_ENV = "PRISMA_WORKSPACE"
DEFAULT_WORKSPACE = "prisma_data"
_ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,80}$")
_OWNER_FILE = "owner.json"  # in a run folder: the process that is writing the run (host, pid)
_UNOWNED_GRACE_S = 60.0  # a run folder with no owner file is only considered abandoned after this long
_MAINTENANCE_FILE = "maintenance.json"  # in the workspace: when old table versions were last cleaned up
MAINTENANCE_EVERY = timedelta(days=1)
"""Opening a workspace compacts its tables and removes old versions when the last clean-up is older than this."""
KEEP_VERSIONS_FOR = timedelta(hours=1)
"""Table versions younger than this are kept by the clean-up, so a recent write can still be looked at or rolled
back; older versions, and files left by writes killed more than 7 days ago (LanceDB's own rule), are removed."""
_RUN_TABLES = ("activations", "features", "interpretations", "families", "themes", "stages")
_LANCE_NOISE = re.compile(r"^lance error: LanceError\(\w+\): |, /\S+\.rs:\d+:\d+$")
INDEX_MIN_ROWS = 1_000_000
"""Vectors in a table before `save_vectors` builds an IVF-PQ index. bench/search.py at 200,000 x 384: the build takes
about a minute, and even with SEARCH_NPROBES and SEARCH_REFINE the index finds only about 78% of the true top 10,
while exact search stays around half a second; so exact search is kept well past that size."""
SEARCH_NPROBES = 50
SEARCH_REFINE = 10
"""Once a table is indexed: partitions probed and candidates re-ranked exactly. At 200,000 x 384 (bench/search.py)
they raise recall@10 from LanceDB's default 0.24 to 0.78 at about the same latency; a flat search ignores them."""

T = TypeVar("T")

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


_STAGE_JSON = ("config", "summary", "versions")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_id(prefix: str) -> str:
    return f"{prefix}-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"


def check_id(value: str) -> str:
    """Ids go into filters and folder names: only our own lowercase slug format is accepted."""
    if not _ID_PATTERN.match(value):
        raise NotFoundError(f"{value!r} is not a valid Prisma id.")
    return value


def resolve_workspace(path: str | Path | None = None) -> Path:
    return Path(path or os.environ.get(WORKSPACE_ENV) or DEFAULT_WORKSPACE).expanduser().resolve()


def _vectors_table_name(embedding_key: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", embedding_key.lower()).strip("_")[-80:]
    return f"vectors__{slug}"


def _retry(write: Callable[[], T], attempts: int = 8) -> T:
    """Concurrent writers on one table can hit a commit conflict; LanceDB wants the loser to retry.

    The random factor in the back-off keeps two sessions from retrying in lockstep. A write that still fails (a
    full disk, a read-only folder) raises StoreError; LanceDB commits are atomic, so the stored data is unchanged.
    """
    for attempt in range(attempts):
        try:
            return write()
        except (OSError, RuntimeError, ValueError) as error:
            conflict = "conflict" in str(error).lower()
            if conflict and attempt < attempts - 1:
                time.sleep(0.05 * 2**attempt * (0.5 + random.random()))
                continue
            if conflict:
                raise StoreError("The workspace is busy: other sessions kept writing to it. Try again.") from error
            if isinstance(error, ValueError):
                raise
            reason = _LANCE_NOISE.sub("", str(error))
            raise StoreError(
                f"Could not write to the workspace: {reason}. What was stored before is unchanged; "
                "free some disk space or check the folder's permissions, then try again."
            ) from error
    raise AssertionError("unreachable")


def _owner_is_gone(folder: Path) -> bool:
    """True when the process that created this run folder has ended (it can only be checked on this machine)."""
    try:
        owner = json.loads((folder / _OWNER_FILE).read_text())
    except (OSError, ValueError):
        return time.time() - folder.stat().st_mtime > _UNOWNED_GRACE_S
    if owner.get("host") != socket.gethostname() or os.name == "nt":  # on Windows, os.kill would end the process
        return False
    try:
        os.kill(int(owner["pid"]), 0)
    except ProcessLookupError:
        return True
    except (OSError, KeyError, TypeError, ValueError):  # PermissionError: alive, run by another user
        return False
    return False


class Workspace:
    """A workspace folder: `lancedb/` holds the tables, `runs/<run_id>/` the SAE weights."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = resolve_workspace(path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self.db = lancedb.connect(str(self.path / "lancedb"))
        except OSError as error:
            raise StoreError(f"Cannot open the workspace folder {self.path}: {error}") from error
        self._remove_abandoned_runs()
        self._reclaim_space_if_due()

    def _remove_abandoned_runs(self) -> None:
        """Removes what a run killed before its record was written left behind (its folder, any rows).

        A run still being written by a live process has a folder and no record too: only runs whose process is
        gone are removed. Best effort: a read-only workspace still opens.
        """
        runs_dir = self.path / "runs"
        folders = (
            [p for p in runs_dir.iterdir() if p.is_dir() and _ID_PATTERN.match(p.name)] if runs_dir.is_dir() else []
        )
        if not folders:
            return
        with contextlib.suppress(OSError, StoreError):
            listed = set(self._read("sae_runs", "true", ["run_id"])["run_id"])
            for folder in folders:
                # The record is looked up again once the owner is known to be gone: it may have been written since.
                if folder.name not in listed and _owner_is_gone(folder) and not self._has_run_record(folder.name):
                    self.delete_run(folder.name)

    def _has_run_record(self, run_id: str) -> bool:
        return not self._read("sae_runs", f"run_id = '{check_id(run_id)}'", ["run_id"]).empty

    # -- tables ---------------------------------------------------------------------------------------------

    def _table(self, name: str, schema: pa.Schema | None = None) -> lancedb.table.Table:
        schema = schema or SCHEMAS[name]
        return _retry(lambda: self.db.create_table(name, schema=schema, exist_ok=True))

    def _has_table(self, name: str) -> bool:
        return name in self.db.list_tables().tables

    def _read(self, name: str, where: str, columns: Sequence[str] | None = None) -> pd.DataFrame:
        if not self._has_table(name):
            return pd.DataFrame(columns=list(columns or SCHEMAS[name].names))
        query = self.db.open_table(name).search().where(where)
        if columns:
            query = query.select(list(columns))
        return query.limit(None).to_pandas()

    def _add(self, name: str, rows: pa.Table | Iterable[dict[str, Any]], schema: pa.Schema | None = None) -> None:
        table = self._table(name, schema)
        data = rows if isinstance(rows, pa.Table) else pa.Table.from_pylist(list(rows), schema=table.schema)
        if data.num_rows:
            # Re-open on every attempt: when two sessions create the same table at once, the loser's append conflicts
            # with the winner's create (an Overwrite) and only succeeds against the table as it now is.
            _retry(lambda: self.db.open_table(name).add(data))

    def _delete(self, name: str, where: str, count_first: bool = True) -> None:
        """Deletes matching rows; nothing is committed (no disk space needed) when no row matches. `count_first=False`
        for a filter known to match that Lance cannot count (on `_rowid`)."""
        if self._has_table(name):
            table = self.db.open_table(name)
            if not count_first or table.count_rows(where):
                _retry(lambda: table.delete(where))

    def table_versions(self, names: Sequence[str]) -> int:
        """The sum of these tables' versions: it grows with every commit to any of them, by any process."""
        return sum(self.db.open_table(name).version for name in names if self._has_table(name))

    # -- disk space -------------------------------------------------------------------------------------------

    def reclaim_space(self, keep_versions_for: timedelta = KEEP_VERSIONS_FOR) -> None:
        """Compacts every table and removes versions older than `keep_versions_for` with LanceDB's own optimize.

        Deleted rows only free their space once no kept version refers to them.
        """
        for name in self.db.list_tables().tables:
            table = self.db.open_table(name)
            _retry(lambda table=table: table.optimize(cleanup_older_than=keep_versions_for))
        (self.path / _MAINTENANCE_FILE).write_text(json.dumps({"reclaimed_at": now_iso()}))

    def _reclaim_space_if_due(self) -> None:
        if self._maintenance_due():
            with contextlib.suppress(OSError, StoreError):  # best effort: a full or read-only workspace still opens
                self.reclaim_space()

    def _maintenance_due(self) -> bool:
        try:
            last = datetime.fromisoformat(json.loads((self.path / _MAINTENANCE_FILE).read_text())["reclaimed_at"])
        except (OSError, ValueError, KeyError, TypeError):
            return self._has_table("datasets")  # never cleaned up: due once there is something to clean
        return datetime.now(UTC) - last > MAINTENANCE_EVERY

    # -- datasets -------------------------------------------------------------------------------------------

    def add_dataset(self, name: str, documents: pd.DataFrame, sources: Sequence[str], report: dict[str, Any]) -> str:
        """Store documents (doc_id, title, text, metadata columns...) and then the dataset record."""
        from prisma_core.embed import text_hash

        name = name.strip() or "dataset"
        dataset_id = new_id("ds")
        metadata_columns = [c for c in documents.columns if c not in ("doc_id", "title", "text")]
        metadata = documents[metadata_columns].astype(object).where(documents[metadata_columns].notna(), None)
        rows = pa.table(
            {
                "dataset_id": [dataset_id] * len(documents),
                "position": np.arange(len(documents), dtype=np.int64),
                "doc_id": documents["doc_id"].astype(str).tolist(),
                "title": [None if pd.isna(t) else str(t) for t in documents.get("title", [None] * len(documents))],
                "text": documents["text"].tolist(),
                "text_hash": [text_hash(t) for t in documents["text"]],
                "metadata": [json.dumps(r, default=str) for r in metadata.to_dict(orient="records")],
            },
            schema=SCHEMAS["documents"],
        )
        self._add("documents", rows)
        record = {
            "dataset_id": dataset_id,
            "name": name,
            "created_at": now_iso(),
            "n_documents": len(documents),
            "sources": json.dumps(list(sources)),
            "report": json.dumps(report, default=str),
            "metadata_columns": json.dumps(metadata_columns),
        }
        try:
            self._add("datasets", [record])
        except StoreError:
            with contextlib.suppress(StoreError):  # unlisted documents are invisible; this only frees the space
                self._delete("documents", f"dataset_id = '{dataset_id}'")
            raise
        return dataset_id

    def datasets(self) -> list[DatasetRecord]:
        frame = self._read("datasets", "true")
        records = [
            DatasetRecord(
                dataset_id=r.dataset_id,
                name=r.name,
                created_at=r.created_at,
                n_documents=int(r.n_documents),
                sources=json.loads(r.sources),
                report=json.loads(r.report),
                metadata_columns=json.loads(r.metadata_columns),
            )
            for r in frame.itertuples()
        ]
        return sorted(records, key=lambda d: d.created_at)

    def dataset(self, dataset_id: str) -> DatasetRecord:
        for record in self.datasets():
            if record.dataset_id == dataset_id:
                return record
        raise NotFoundError(f"No dataset {dataset_id!r} in workspace {self.path}.")

    def rename_dataset(self, dataset_id: str, name: str) -> None:
        self.dataset(dataset_id)
        table = self.db.open_table("datasets")
        _retry(lambda: table.update(where=f"dataset_id = '{check_id(dataset_id)}'", values={"name": name.strip()}))

    def delete_dataset(self, dataset_id: str) -> None:
        """Record first, then everything derived, so a crash half-way leaves no visible half-dataset."""
        self.dataset(dataset_id)
        where = f"dataset_id = '{check_id(dataset_id)}'"
        runs = [run.run_id for run in self.runs(dataset_id)]
        self._delete("datasets", where)
        for run_id in runs:
            self.delete_run(run_id)
        self._delete("documents", where)
        self._delete("stages", where)
        for name in self.db.list_tables().tables:
            if name.startswith("vectors__"):
                self._delete(name, where)
        self._reclaim_space_if_due()  # a long-running app opens its workspace once: clean up on deletions too

    def documents(self, dataset_id: str, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """Documents in stored order (`position` = row index used by embeddings and activations)."""
        frame = self._read("documents", f"dataset_id = '{check_id(dataset_id)}'", columns)
        if frame.empty and not columns:
            self.dataset(dataset_id)
        return frame.sort_values("position").reset_index(drop=True) if "position" in frame else frame

    def metadata(self, dataset_id: str) -> pd.DataFrame:
        """Metadata columns as a typed frame, one row per document in stored order.

        A column mixing numbers and text (a year that is sometimes "unknown") becomes a text column: every
        value is kept, and the frame can be written to Parquet or compared by group.
        """
        docs = self.documents(dataset_id, ["position", "metadata"])
        frame = pd.DataFrame([json.loads(m) for m in docs["metadata"]]).convert_dtypes()
        mixed = [column for column in frame.columns if frame[column].dtype == object]
        return frame.astype(dict.fromkeys(mixed, "string"))

    # -- vectors (embedding cache + search) -------------------------------------------------------------------

    def cached_vectors(self, embedding_key: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors already computed for these text hashes in this embedding space (any dataset)."""
        name = _vectors_table_name(embedding_key)
        if not self._has_table(name) or not hashes:
            return {}
        wanted = set(hashes)
        stored = self.db.open_table(name).search().select(["text_hash", "vector"]).limit(None).to_arrow()
        found: dict[str, np.ndarray] = {}
        for key, vector in zip(
            stored["text_hash"].to_pylist(), stored["vector"].to_numpy(zero_copy_only=False), strict=True
        ):
            if key in wanted:
                found[key] = np.asarray(vector, dtype=np.float32)
        return found

    def has_vectors(self, dataset_id: str, embedding_key: str) -> bool:
        name = _vectors_table_name(embedding_key)
        if not self._has_table(name):
            return False
        positions = self._read(name, f"dataset_id = '{check_id(dataset_id)}'", ["position"])["position"]
        return positions.nunique() == self.dataset(dataset_id).n_documents

    def save_vectors(self, dataset_id: str, embedding_key: str, vectors: np.ndarray) -> None:
        """Vectors in document order, written once: a dataset's documents and a space's model never change.

        Nothing is deleted first, so a reader never finds the dataset without vectors. Two processes embedding the
        same dataset at once may both write; the copy written second is then removed (readers skip it meanwhile).
        """
        if self.has_vectors(dataset_id, embedding_key):
            return
        docs = self.documents(dataset_id, ["position", "doc_id", "text_hash"])
        if len(docs) != len(vectors):
            raise StoreError(f"Got {len(vectors)} vectors for {len(docs)} documents.")
        schema = pa.schema(
            [
                ("dataset_id", pa.string()),
                ("position", pa.int64()),
                ("doc_id", pa.string()),
                ("text_hash", pa.string()),
                ("vector", pa.list_(pa.float32(), vectors.shape[1])),
            ]
        )
        rows = pa.table(
            {
                "dataset_id": [dataset_id] * len(docs),
                "position": docs["position"].to_numpy(),
                "doc_id": docs["doc_id"].tolist(),
                "text_hash": docs["text_hash"].tolist(),
                "vector": pa.FixedSizeListArray.from_arrays(
                    pa.array(vectors.astype(np.float32).ravel()), vectors.shape[1]
                ),
            },
            schema=schema,
        )
        name = _vectors_table_name(embedding_key)
        self._add(name, rows, schema)
        self._remove_second_copies(name, dataset_id)
        self._maybe_index(name)

    def _remove_second_copies(self, name: str, dataset_id: str) -> None:
        """Keeps the first-written row of each document position (every process picks the same rows to drop)."""
        rows = (
            self.db.open_table(name)
            .search()
            .where(f"dataset_id = '{check_id(dataset_id)}'")
            .select(["position"])
            .with_row_id(True)
            .limit(None)
            .to_pandas()
            .sort_values("_rowid")
        )
        extra = rows.loc[rows["position"].duplicated(), "_rowid"]
        if len(extra):
            self._delete(name, f"_rowid IN ({', '.join(str(int(row_id)) for row_id in extra)})", count_first=False)

    def vectors(self, dataset_id: str, embedding_key: str) -> np.ndarray:
        """[n_documents, d] float32 in document order."""
        name = _vectors_table_name(embedding_key)
        frame = self._read(name, f"dataset_id = '{check_id(dataset_id)}'", ["position", "vector"])
        frame = frame.drop_duplicates("position")  # a second copy from a concurrent write, about to be removed
        if len(frame) != self.dataset(dataset_id).n_documents:
            raise NotFoundError("This dataset has not been embedded with this model yet: run the embedding step.")
        frame = frame.sort_values("position")
        return np.stack(frame["vector"].to_numpy()).astype(np.float32)

    def search_documents(self, dataset_id: str, embedding_key: str, query: np.ndarray, limit: int = 10) -> pd.DataFrame:
        """Nearest documents by cosine distance: position, doc_id, distance."""
        table = self.db.open_table(_vectors_table_name(embedding_key))
        return (
            table.search(np.asarray(query, dtype=np.float32))
            .distance_type("cosine")
            .where(f"dataset_id = '{check_id(dataset_id)}'", prefilter=True)
            .nprobes(SEARCH_NPROBES)
            .refine_factor(SEARCH_REFINE)
            .select(["position", "doc_id", "_distance"])
            .limit(limit)
            .to_pandas()
            .rename(columns={"_distance": "distance"})
        )

    def _maybe_index(self, name: str) -> None:
        """Past INDEX_MIN_ROWS vectors an IVF-PQ index keeps search fast; below it exact search is fast enough."""
        table = self.db.open_table(name)
        rows = table.count_rows()
        if rows >= INDEX_MIN_ROWS and not table.list_indices():
            table.create_index(metric="cosine", vector_column_name="vector", num_partitions=int(np.sqrt(rows)))

    # -- runs -----------------------------------------------------------------------------------------------

    def new_run_dir(self) -> tuple[str, Path]:
        """A folder for a new run's weights, marked with the process writing it (see _remove_abandoned_runs)."""
        run_id = new_id("run")
        directory = self.path / "runs" / run_id
        try:
            directory.mkdir(parents=True)
            (directory / _OWNER_FILE).write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid()}))
        except OSError as error:
            shutil.rmtree(directory, ignore_errors=True)
            raise StoreError(f"Could not create the run folder {directory}: {error.strerror or error}.") from error
        return run_id, directory

    def add_run(self, record: RunRecord) -> None:
        """The record is written last: only a run whose artefacts are all stored is listed."""
        self._add(
            "sae_runs",
            [
                {
                    "run_id": record.run_id,
                    "dataset_id": record.dataset_id,
                    "created_at": record.created_at,
                    "embedding_key": record.embedding_key,
                    "config": json.dumps(record.config),
                    "metrics": json.dumps(record.metrics),
                    "history": json.dumps(record.history),
                    "weights_dir": self._relative_to_workspace(record.weights_dir),
                    "versions": json.dumps(record.versions),
                }
            ],
        )

    def _relative_to_workspace(self, path: str) -> str:
        """Paths inside the workspace are stored relative to it, so a moved or copied workspace keeps its runs."""
        return Path(path).relative_to(self.path).as_posix() if Path(path).is_relative_to(self.path) else path

    def _in_workspace(self, stored: str) -> Path:
        """A stored path, resolved; an absolute one from a workspace since moved is looked up under runs/ here."""
        path = Path(stored)
        if not path.is_absolute():
            return self.path / path
        return path if path.exists() else self.path / "runs" / path.name

    def runs(self, dataset_id: str | None = None) -> list[RunRecord]:
        where = f"dataset_id = '{check_id(dataset_id)}'" if dataset_id else "true"
        frame = self._read("sae_runs", where)
        records = [
            RunRecord(
                run_id=r.run_id,
                dataset_id=r.dataset_id,
                created_at=r.created_at,
                embedding_key=r.embedding_key,
                config=json.loads(r.config),
                metrics=json.loads(r.metrics),
                history=json.loads(r.history),
                weights_dir=str(self._in_workspace(r.weights_dir)),
                versions=json.loads(r.versions),
            )
            for r in frame.itertuples()
        ]
        return sorted(records, key=lambda run: run.created_at)

    def run(self, run_id: str) -> RunRecord:
        runs = self._read("sae_runs", f"run_id = '{check_id(run_id)}'")
        if runs.empty:
            raise NotFoundError(f"No SAE run {run_id!r} in workspace {self.path}.")
        return next(r for r in self.runs(runs["dataset_id"].iloc[0]) if r.run_id == run_id)

    def latest_run(self, dataset_id: str | None = None) -> RunRecord:
        runs = self.runs(dataset_id)
        if not runs:
            raise NotFoundError("No trained SAE run yet: train one first.")
        return runs[-1]

    def delete_run(self, run_id: str) -> None:
        """A listed run loses its record first, so a crash half-way shows no half-run. An unlisted one (a run that
        failed while being written, perhaps because the disk filled up) loses its folder first, which frees the
        space the table deletes need."""
        where = f"run_id = '{check_id(run_id)}'"
        folder = self.path / "runs" / run_id
        if self._has_run_record(run_id):
            self._delete("sae_runs", where)
        shutil.rmtree(folder, ignore_errors=True)
        for name in _RUN_TABLES:
            self._delete(name, where)

    # -- stage records ------------------------------------------------------------------------------------------

    def add_stage(self, record: StageRecord) -> None:
        """Written after the stage's artefacts (the record of a run's training just before the run record)."""
        row = asdict(record)
        self._add("stages", [row | {key: json.dumps(row[key]) for key in _STAGE_JSON}])

    def stages(self, dataset_id: str, run_id: str | None = None) -> list[StageRecord]:
        """The dataset's stage records, oldest first; with `run_id`, of that run and of no other."""
        where = f"dataset_id = '{check_id(dataset_id)}'"
        if run_id is not None:
            where += f" AND (run_id = '{check_id(run_id)}' OR run_id = '')"
        rows = self._read("stages", where).to_dict(orient="records")
        records = [StageRecord(**row | {key: json.loads(row[key]) for key in _STAGE_JSON}) for row in rows]
        return sorted(records, key=lambda record: record.created_at)

    # -- run artefacts ------------------------------------------------------------------------------------------

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

    def activations(self, run_id: str) -> pd.DataFrame:
        return self._read("activations", f"run_id = '{check_id(run_id)}'", ["position", "feature_id", "value"])

    def save_features(self, run_id: str, stats: pd.DataFrame) -> None:
        frame = stats.assign(run_id=run_id)[SCHEMAS["features"].names]
        self._add("features", pa.Table.from_pandas(frame, schema=SCHEMAS["features"], preserve_index=False))

    def features(self, run_id: str) -> pd.DataFrame:
        frame = self._read("features", f"run_id = '{check_id(run_id)}'")
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
            _retry(lambda merge=merge, rows=rows: merge.execute(rows))

    def prefer_interpretation(self, run_id: str, feature_id: int, interpretation_id: str) -> None:
        table = self._table("interpretations")
        feature = f"run_id = '{check_id(run_id)}' AND feature_id = {int(feature_id)}"
        _retry(lambda: table.update(where=feature, values={"preferred": False}))
        chosen = f"{feature} AND interpretation_id = '{check_id(interpretation_id)}'"
        _retry(lambda: table.update(where=chosen, values={"preferred": True}))

    def save_families(self, run_id: str, rows: Sequence[dict[str, Any]]) -> None:
        """Replace a run's families (see `_replace_generation`)."""
        self._replace_generation(
            "families",
            run_id,
            "family_id",
            [
                row
                | {
                    "members": json.dumps([int(m) for m in row["members"]]),
                    "edges": json.dumps([[int(p), int(c), float(w)] for p, c, w in row["edges"]]),
                }
                for row in rows
            ],
        )

    def families(self, run_id: str) -> list[dict[str, Any]]:
        return [
            {**row, "members": json.loads(row["members"]), "edges": [tuple(e) for e in json.loads(row["edges"])]}
            for row in self._latest_generation("families", run_id, "family_id")
        ]

    def save_themes(self, run_id: str, rows: Sequence[dict[str, Any]]) -> None:
        """Replace a run's themes: theme_id, label, description, label_source, n_documents, features (ids),
        evidence (one weight per feature)."""
        self._replace_generation(
            "themes",
            run_id,
            "theme_id",
            [
                row
                | {
                    "features": json.dumps([int(f) for f in row["features"]]),
                    "evidence": [float(e) for e in row["evidence"]],
                }
                for row in rows
            ],
        )

    def themes(self, run_id: str) -> list[dict[str, Any]]:
        """A run's themes, theme 0 first; empty for runs made before themes existed."""
        return [
            {**row, "features": json.loads(row["features"]), "evidence": np.asarray(row["evidence"], np.float32)}
            for row in self._latest_generation("themes", run_id, "theme_id")
        ]

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
        _retry(lambda: merge.execute(new))

    def _latest_generation(self, name: str, run_id: str, order: str) -> list[dict[str, Any]]:
        frame = self._read(name, f"run_id = '{check_id(run_id)}'")
        frame = frame[frame["generation"] == frame["generation"].max()].sort_values(order)
        return frame.drop(columns=["run_id", "generation"]).to_dict(orient="records")
