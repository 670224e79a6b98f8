"""Datasets: their documents (text, title, metadata) in stored order and the dataset records."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import replace
from datetime import timedelta
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from prisma_core.errors import LostRowsError, NotFoundError, SettingsError, StoreError
from prisma_core.names import checked_name
from prisma_core.store.ids import check_id, new_id, now_iso
from prisma_core.store.maintenance import KEEP_VERSIONS_FOR
from prisma_core.store.ownership import mark_owner, owner_is_gone
from prisma_core.store.retry import retry
from prisma_core.store.runs import Runs
from prisma_core.store.schemas import SCHEMAS, DatasetRecord
from prisma_core.store.stages import INGEST, RECORDS
from prisma_core.store.tables import reading


def text_hash(text: str) -> str:
    """The key of the embedding cache: equal texts share their vectors across datasets."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def with_text_hashes(documents: pd.DataFrame) -> pd.DataFrame:
    """The documents with a `text_hash` column after `text`: each text hashed once, here, and the hash carried to
    the store (ingest finds repeated texts by it too). A `text_hash` column they hold already is hashed anew: the
    embedding cache relies on it."""
    hashed = documents.drop(columns="text_hash", errors="ignore")
    hashed.insert(hashed.columns.get_loc("text") + 1, "text_hash", [text_hash(text) for text in documents["text"]])
    return hashed


DOCUMENT_COLUMNS = ("doc_id", "title", "text", "text_hash")
"""The columns of a document every dataset has; the others a batch carries are its metadata."""


_INGESTS = "ingests"
"""In the workspace: a folder per ingest being written, naming its process (removed when it ends, however it ends
short of a hard kill)."""
_ADDING: ContextVar[tuple[str, ...]] = ContextVar("prisma_adding_documents", default=())
"""The datasets this thread (its context) holds for adding documents: an addition inside another one goes on."""
BUSY_ADDING = (
    "Documents are being added to this dataset by another session or command right now: add these once it is done. "
    "Nothing was stored."
)
BATCH_ROWS = 16_384
"""Documents `Datasets.document_batches` reads at a time: about 15 MB of texts at 150 words each."""

LARGE_DATASET = 100_000
"""From this many documents a dataset is *large*: the app no longer holds whole-corpus things in memory (every
text, every vector, a picker of every document) but reads documents by position when it shows them, finds a
document by its id, searches the vectors table through LanceDB and draws maps and statistics on a seeded sample.
At 100,000 documents of 150 words the texts alone take about 250 MB and the vectors 150 MB; below it the app keeps
everything in memory, as it always did. `PRISMA_LARGE_DATASET` (environment or the app's secrets) overrides it."""
LARGE_DATASET_ENV = "PRISMA_LARGE_DATASET"
SHOWN_COLUMNS = ("position", "doc_id", "title", "text")
"""The columns of a document the app shows."""
POSITIONS_PER_QUERY = 1_000
"""Positions or ids one filter names at most (longer lists are read in several queries)."""


def is_large(n_documents: int) -> bool:
    """Whether a dataset of this size is read the bounded way (see LARGE_DATASET)."""
    setting = os.environ.get(LARGE_DATASET_ENV) or str(LARGE_DATASET)
    if not setting.isdigit() or int(setting) < 1:
        raise SettingsError(f"{LARGE_DATASET_ENV} must be a whole number of documents (at least 1), got {setting!r}.")
    return n_documents >= int(setting)


def sample_positions(n_documents: int, size: int, seed: int = 0) -> np.ndarray:
    """A seeded random sample of `size` document positions (all of them when there are fewer), in position order."""
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n_documents, size=min(size, n_documents), replace=False))


class Datasets(Runs):
    """A dataset owns its runs: deleting it deletes them."""

    def add_dataset(self, name: str, documents: pd.DataFrame, sources: Sequence[str], report: dict[str, Any]) -> str:
        """Store documents (doc_id, title, text, metadata columns...) and then the dataset record."""
        return self.add_dataset_batches(name, [with_text_hashes(documents)], sources, lambda: report)

    def add_dataset_batches(
        self,
        name: str,
        batches: Iterable[pd.DataFrame],
        sources: Sequence[str],
        report: Callable[[], dict[str, Any]],
    ) -> str:
        """Store documents (doc_id, title, text, text_hash as `with_text_hashes` adds it, metadata columns...) a batch
        at a time (every batch with the same columns), then the dataset record, with the
        report as it is once the batches are done. Until the record is added the rows are invisible; if anything
        fails, the batches' exceptions included, the rows written are deleted."""
        name = checked_name(name, "The dataset's name")
        self._remove_abandoned_documents()
        dataset_id = new_id("ds")
        marker = self.root / _INGESTS / dataset_id
        n_documents, metadata_columns = 0, []
        try:
            marker.make_folder()
            mark_owner(marker)
            for documents in batches:
                metadata_columns = [c for c in documents.columns if c not in DOCUMENT_COLUMNS]
                self.tables.add("documents", _document_rows(dataset_id, documents, n_documents, metadata_columns))
                n_documents += len(documents)
            record = {
                "dataset_id": dataset_id,
                "name": name,
                "created_at": now_iso(),
                "n_documents": n_documents,
                "sources": json.dumps(list(sources)),
                "report": json.dumps(report(), default=str),
                "metadata_columns": json.dumps(metadata_columns),
            }
            self.tables.add("datasets", [record])
        except BaseException:  # an interrupt too: nothing half-written stays behind
            with contextlib.suppress(StoreError):  # unlisted documents are invisible; this only frees the space
                self.tables.delete("documents", f"dataset_id = '{dataset_id}'")
            raise
        finally:
            with contextlib.suppress(OSError):
                marker.remove()
        self._reclaim_space_if_due()
        return dataset_id

    def append_documents(self, dataset_id: str, batches: Iterable[pd.DataFrame], sources: Sequence[str]) -> int:
        """Add documents (as `add_dataset_batches` takes them) to a dataset, at the positions after its last; returns
        how many. The dataset's record (count, sources, metadata columns) changes last, in one commit; if anything
        fails before, the rows written are deleted, and rows a killed append left behind are removed first. One
        addition per dataset at a time (StoreError while another process adds to it)."""
        with self.adding_documents(dataset_id):
            return self._append_documents(dataset_id, batches, sources)

    def _append_documents(self, dataset_id: str, batches: Iterable[pd.DataFrame], sources: Sequence[str]) -> int:
        record = self.dataset(dataset_id)  # read once the dataset is ours: as the last addition left it
        beyond = f"dataset_id = '{check_id(dataset_id)}' AND position >= {record.n_documents}"
        n_added, metadata_columns = 0, list(record.metadata_columns)
        try:
            self.tables.delete("documents", beyond)
            for documents in batches:
                new_columns = [c for c in documents.columns if c not in DOCUMENT_COLUMNS]
                metadata_columns += [c for c in new_columns if c not in metadata_columns]
                rows = _document_rows(dataset_id, documents, record.n_documents + n_added, new_columns)
                self.tables.add("documents", rows)
                n_added += len(documents)
            values = {
                "n_documents": record.n_documents + n_added,
                "sources": json.dumps([*record.sources, *sources]),
                "metadata_columns": json.dumps(metadata_columns),
            }
            table = self.db.open_table("datasets")
            retry(lambda: table.update(where=f"dataset_id = '{check_id(dataset_id)}'", values=values), self.uri)
        except BaseException:  # an interrupt too: the dataset stays as it was
            with contextlib.suppress(StoreError):
                self.tables.delete("documents", beyond)
            raise
        return n_added

    @contextlib.contextmanager
    def adding_documents(self, dataset_id: str) -> Iterator[None]:
        """Holds the dataset for one addition of documents (reading, embedding and placing them): a second addition,
        from another session, command or thread, is refused with StoreError until this one ends (`Tables.holding`:
        a compare-and-swap on the dataset's `writer`, as atomic in an object store as on a local disk)."""
        if dataset_id in _ADDING.get():
            yield
            return
        self.dataset(dataset_id)  # NotFoundError for a dataset that does not exist
        with self.tables.holding("datasets", f"dataset_id = '{check_id(dataset_id)}'", "writer", BUSY_ADDING):
            held = _ADDING.set((*_ADDING.get(), dataset_id))
            try:
                yield
            finally:
                _ADDING.reset(held)

    def reclaim_space(self, keep_versions_for: timedelta = KEEP_VERSIONS_FOR) -> None:
        """The daily clean-up (see `Maintenance.reclaim_space`), after removing what killed ingests left behind."""
        self._remove_abandoned_documents()
        super().reclaim_space(keep_versions_for)

    def _remove_abandoned_documents(self) -> None:
        """Removes the documents of ingests killed before their dataset record was written (a hard kill skips the
        clean-up `add_dataset_batches` does on any error). An ingest still running in a live process is left alone
        (its folder under ingests/ names it), and so is a dataset whose record a lost table version held (it has an
        ingest stage record; `Repairs.repair` restores it). Best effort: a failure here never stops an ingest."""
        with contextlib.suppress(OSError, StoreError):
            stored = self._dataset_ids_with_documents()
            kept = set(self.tables.read("datasets", "true", ["dataset_id"])["dataset_id"])
            kept |= set(self.tables.read(RECORDS, f"stage = '{INGEST}'", ["dataset_id"])["dataset_id"])
            for dataset_id in sorted(stored - kept):
                marker, where = self.root / _INGESTS / dataset_id, f"dataset_id = '{check_id(dataset_id)}'"
                # The record is looked up again once the ingest is known to be over: it may have been written since.
                if (marker.modified() is None or owner_is_gone(marker)) and self.tables.read("datasets", where).empty:
                    self.tables.delete("documents", where)
                    marker.remove()
            for marker in (self.root / _INGESTS).folders():  # an ingest killed before or after storing rows
                if marker.name not in stored - kept and owner_is_gone(marker):
                    marker.remove()

    def _dataset_ids_with_documents(self) -> set[str]:
        """The dataset ids the documents table holds rows of (one scan of that column)."""
        if not self.tables.has("documents"):
            return set()
        query = self.db.open_table("documents").search().select(["dataset_id"])
        return {
            value
            for batch in self.tables.batches("documents", query, 4 * BATCH_ROWS)
            for value in pc.unique(batch["dataset_id"]).to_pylist()
        }

    def datasets(self) -> list[DatasetRecord]:
        records = self.tables.records("datasets", "true", DatasetRecord)
        return [record if isinstance(record.writer, str) else replace(record, writer="") for record in records]

    def dataset(self, dataset_id: str) -> DatasetRecord:
        for record in self.datasets():
            if record.dataset_id == dataset_id:
                return record
        raise NotFoundError(f"No dataset {dataset_id!r} in workspace {self.path}.")

    def rename_dataset(self, dataset_id: str, name: str) -> None:
        self.dataset(dataset_id)
        name = checked_name(name, "The dataset's name")
        table = self.db.open_table("datasets")
        retry(lambda: table.update(where=f"dataset_id = '{check_id(dataset_id)}'", values={"name": name}), self.uri)

    def delete_dataset(self, dataset_id: str) -> None:
        """Record first, then everything derived, so a crash half-way leaves no visible half-dataset."""
        self.dataset(dataset_id)
        where = f"dataset_id = '{check_id(dataset_id)}'"
        runs = [run.run_id for run in self.runs(dataset_id)]
        self.tables.delete("datasets", where)
        for run_id in runs:
            self.delete_run(run_id)
        self.tables.delete("documents", where)
        self.tables.delete(RECORDS, where)
        self.tables.delete("maps", where)
        for name in self.db.list_tables().tables:
            if name.startswith("vectors__"):
                self.tables.delete(name, where)
        self._reclaim_space_if_due()

    def _listed_documents(self, dataset_id: str) -> str:
        """The filter of the dataset's documents as its record counts them (NotFoundError for a dataset that does
        not exist)."""
        return listed_documents(dataset_id, self.dataset(dataset_id).n_documents)

    def documents(self, dataset_id: str, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """Documents in stored order (`position` = row index used by embeddings and activations)."""
        n_documents = self.dataset(dataset_id).n_documents
        frame = self.tables.read("documents", listed_documents(dataset_id, n_documents), columns)
        if len(frame) < n_documents:
            raise LostRowsError(lost_documents(dataset_id, len(frame), n_documents))
        return frame.sort_values("position").reset_index(drop=True) if "position" in frame else frame

    def documents_left(self, dataset_id: str) -> int:
        """How many of the dataset's documents are stored: fewer than its record counts only after a repair removed
        a damaged file's rows."""
        where = self._listed_documents(dataset_id)
        with reading("documents"):
            return self.db.open_table("documents").count_rows(where) if self.tables.has("documents") else 0

    def _raise_lost_documents(self, dataset_id: str) -> None:
        raise LostRowsError(
            lost_documents(dataset_id, self.documents_left(dataset_id), self.dataset(dataset_id).n_documents)
        )

    def metadata(self, dataset_id: str) -> pd.DataFrame:
        """Metadata columns as a typed frame, one row per document in stored order.

        A column mixing numbers and text (a year that is sometimes "unknown") becomes a text column: every
        value is kept, and the frame can be written to Parquet or compared by group. Lists (a Parquet list column)
        read as their JSON text, every item kept. Dates, stored as their text, are read back as dates.
        """
        parts = [  # parsed a batch at a time: a million documents' metadata never sits in memory as dicts
            pd.DataFrame([json.loads(m) for m in batch["metadata"]], index=batch["position"].to_numpy())
            for batch in self.document_batches(dataset_id, ["position", "metadata"])
        ]
        frame = pd.concat(parts).sort_index().reset_index(drop=True) if parts else pd.DataFrame()
        frame = frame.convert_dtypes()
        mixed = [column for column in frame.columns if frame[column].dtype == object]
        frame = frame.assign(**{column: frame[column].map(_json_text).astype("string") for column in mixed})
        return frame.assign(
            **{column: dates for column in frame.columns if (dates := _stored_dates(frame[column])) is not None}
        )

    def documents_at(
        self, dataset_id: str, positions: Sequence[int] | np.ndarray, columns: Sequence[str] = SHOWN_COLUMNS
    ) -> pd.DataFrame:
        """The documents at these positions, in the order given (a position given twice appears twice), reading
        only those rows: what the app shows of a large dataset. `columns` must include `position`."""
        positions = np.asarray(positions, dtype=np.int64)
        found = self._documents_where(dataset_id, "position", [str(int(p)) for p in np.unique(positions)], columns)
        if not np.isin(positions, found["position"].to_numpy()).all():
            self._raise_lost_documents(dataset_id)
        return found.set_index("position", drop=False).loc[positions].reset_index(drop=True)

    def documents_with_ids(
        self, dataset_id: str, doc_ids: Sequence[str], columns: Sequence[str] = SHOWN_COLUMNS
    ) -> pd.DataFrame:
        """The documents with these ids (those that exist), in position order."""
        quoted = [_sql_text(doc_id) for doc_id in dict.fromkeys(doc_ids)]
        found = self._documents_where(dataset_id, "doc_id", quoted, columns)
        return found.sort_values("position").reset_index(drop=True) if "position" in found else found

    def doc_ids_starting(self, dataset_id: str, prefix: str, limit: int = 20) -> list[str]:
        """Up to `limit` document ids starting with `prefix` (case-sensitive), in position order: suggestions for a
        typed id."""
        pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        where = f"{self._listed_documents(dataset_id)} AND doc_id LIKE {_sql_text(pattern + '%')} ESCAPE '\\'"
        if not self.tables.has("documents"):
            return []
        with reading("documents"):
            query = self.db.open_table("documents").search().where(where).select(["position", "doc_id"]).limit(limit)
            return query.to_pandas().sort_values("position")["doc_id"].tolist()

    def _documents_where(self, dataset_id: str, column: str, values: list[str], columns: Sequence[str]) -> pd.DataFrame:
        """Rows of the dataset whose `column` is one of `values` (SQL literals), POSITIONS_PER_QUERY at a time."""
        dataset = self._listed_documents(dataset_id)
        parts = [
            self.tables.read(
                "documents", f"{dataset} AND {column} IN ({', '.join(values[i : i + POSITIONS_PER_QUERY])})", columns
            )
            for i in range(0, len(values), POSITIONS_PER_QUERY)
        ]
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(columns))

    def document_batches(
        self, dataset_id: str, columns: Sequence[str], rows: int = BATCH_ROWS
    ) -> Iterator[pd.DataFrame]:
        """The dataset's documents, at most `rows` at a time, in no set order (select `position` to place them): one
        scan of the documents table that never holds the whole dataset."""
        n_documents = self.dataset(dataset_id).n_documents
        if not self.tables.has("documents"):
            return
        query = self.db.open_table("documents").search().where(listed_documents(dataset_id, n_documents))
        n_read = 0
        for batch in self.tables.batches("documents", query.select(list(columns)), rows):
            n_read += batch.num_rows
            yield batch.to_pandas()
        if n_read < n_documents:
            raise LostRowsError(lost_documents(dataset_id, n_read, n_documents))


def listed_documents(dataset_id: str, n_documents: int) -> str:
    """The filter of a dataset's documents as its record counts them: not the rows an addition is writing, or a
    killed one left behind."""
    return f"dataset_id = '{check_id(dataset_id)}' AND position < {int(n_documents)}"


def lost_documents(dataset_id: str, n_left: int, n_documents: int) -> str:
    """What to say of a dataset a repair left with fewer documents than its record counts."""
    return (
        f"dataset {dataset_id}: {n_left:,} of its {n_documents:,} documents are left (the others were in a damaged "
        f"file a repair removed); delete it (`python -m prisma_core delete --dataset {dataset_id}`, or on the Datasets "
        "page) and ingest its files again"
    )


def _sql_text(value: str) -> str:
    """A text as an SQL string literal (quotes doubled)."""
    return "'" + str(value).replace("'", "''") + "'"


def _document_rows(dataset_id: str, documents: pd.DataFrame, first: int, metadata_columns: list[str]) -> pa.Table:
    """The rows of the documents table, at positions from `first` on; metadata as JSON (missing values as null)."""
    metadata = documents[metadata_columns].astype(object).where(documents[metadata_columns].notna(), None)
    return pa.table(
        {
            "dataset_id": [dataset_id] * len(documents),
            "position": np.arange(first, first + len(documents), dtype=np.int64),
            "doc_id": documents["doc_id"].astype(str).tolist(),
            "title": [None if pd.isna(t) else str(t) for t in documents.get("title", [None] * len(documents))],
            "text": documents["text"].tolist(),
            "text_hash": documents["text_hash"].tolist(),
            "metadata": [json.dumps(r, default=_json_value) for r in metadata.to_dict(orient="records")],
        },
        schema=SCHEMAS["documents"],
    )


def _json_value(value: Any) -> Any:
    """A metadata value JSON cannot hold as it is: an array (a Parquet list column) as its list, every item kept,
    a numpy number as the number, anything else (a date) as its text."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


STORED_DATE = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:[+-]\d{2}:\d{2})?"
"""How a date is written into a document's metadata (a timestamp's text): read back as a date."""


def _stored_dates(column: pd.Series) -> pd.Series | None:
    """A text column every value of which is a stored date, as dates; None for any other column."""
    if not isinstance(column.dtype, pd.StringDtype):
        return None
    values = column.dropna()
    first = values.head(100)  # most text columns fail here, before every value is matched
    if values.empty or not (first.str.fullmatch(STORED_DATE).all() and values.str.fullmatch(STORED_DATE).all()):
        return None
    try:
        return pd.to_datetime(column, format="ISO8601")
    except (ValueError, TypeError, OverflowError):
        return None  # dates of several time zones: kept as text, as they were read


def _json_text(value: Any) -> Any:
    """A list or a mapping as JSON text (as JSON files' lists are read); anything else as it is."""
    return json.dumps(value, ensure_ascii=False) if isinstance(value, list | dict) else value
