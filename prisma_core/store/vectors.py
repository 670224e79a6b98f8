"""Document vectors per embedding space: the embedding cache and semantic search."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from prisma_core.errors import NotFoundError, StoreError
from prisma_core.store.datasets import Datasets
from prisma_core.store.ids import check_id
from prisma_core.store.retry import retry
from prisma_core.store.schemas import SCHEMAS
from prisma_core.store.tables import Tables, reading

if TYPE_CHECKING:
    import lancedb

INDEX_MIN_ROWS = 1_000_000
"""Vectors in a table before `save_vectors` builds an IVF-PQ index. bench/search.py at 200,000 x 384: the build takes
about a minute, and even with SEARCH_NPROBES and SEARCH_REFINE the index finds only about 78% of the true top 10,
while exact search stays around half a second; so exact search is kept well past that size."""
SEARCH_NPROBES = 50
SEARCH_REFINE = 10
"""Once a table is indexed: partitions probed and candidates re-ranked exactly. At 200,000 x 384 (bench/search.py)
they raise recall@10 from LanceDB's default 0.24 to 0.78 at about the same latency; a flat search ignores them."""


READ_ROWS = 65_536
"""Vectors `StoredVectors.all` reads at a time (96 MB at 384 dimensions)."""
NOT_EMBEDDED = "This dataset has not been embedded with this model yet: run the embedding step."


@dataclass(frozen=True)
class StoredVectors:
    """A dataset's vectors in one embedding space, read from the vectors table by document position, a slice at a
    time (`Vectors.stored_vectors`): what training and analysis read when the vectors need not all be in memory.
    Holds one row id per document (8 bytes), not the vectors."""

    table: lancedb.table.Table
    row_ids: np.ndarray
    """[n_documents] uint64: the row holding each position's vector (its first-written copy)."""
    dim: int

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.row_ids), self.dim

    def all(self) -> np.ndarray:
        """Every vector in position order, [n_documents, d] float32, read READ_ROWS at a time into one array (no
        second copy of the whole)."""
        vectors = np.empty(self.shape, dtype=np.float32)
        for start, rows in self.slices():
            vectors[start : start + len(rows)] = rows
        return vectors

    def slices(self, rows: int = READ_ROWS) -> Iterator[tuple[int, np.ndarray]]:
        """(first position, vectors [m, d]) of consecutive slices of at most `rows` documents, in position order."""
        for start in range(0, self.shape[0], rows):
            yield start, self.rows(np.arange(start, min(start + rows, self.shape[0])))

    def rows(self, positions: np.ndarray) -> np.ndarray:
        """Vectors of the documents at these positions, in the order given: [m, d] float32."""
        positions = np.asarray(positions, dtype=np.int64)
        if not len(positions):
            return np.zeros((0, self.dim), np.float32)
        with reading(self.table.name):
            found = self.table.take_row_ids(self.row_ids[positions].tolist()).select(["position", "vector"]).to_arrow()
        vectors = found["vector"].combine_chunks().flatten().to_numpy().reshape(-1, self.dim)
        found_positions = found["position"].to_numpy()
        by_position = np.argsort(found_positions, kind="stable")
        where = by_position[np.searchsorted(found_positions[by_position], positions).clip(0, len(found) - 1)]
        if not np.array_equal(found_positions[where], positions):
            raise StoreError("The stored vectors changed while they were read (compacted or deleted): start again.")
        return np.ascontiguousarray(vectors[where], dtype=np.float32)


DocumentVectors = np.ndarray | StoredVectors
"""A dataset's vectors [n_documents, d]: in memory, or read from the vectors table a slice at a time."""


def vector_slices(vectors: DocumentVectors, rows: int = READ_ROWS) -> Iterator[tuple[int, np.ndarray]]:
    """(first position, vectors) slices of at most `rows` stored vectors covering every document in order: one
    slice for vectors in memory."""
    if isinstance(vectors, StoredVectors):
        yield from vectors.slices(rows)
    else:
        yield 0, vectors


def vector_rows(vectors: DocumentVectors, positions: np.ndarray) -> np.ndarray:
    """Vectors of the documents at these positions, in the order given: [m, d]."""
    return vectors.rows(positions) if isinstance(vectors, StoredVectors) else vectors[positions]


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), so dot products are cosines. [n, d] -> [n, d]."""
    return matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)


def space_slug(embedding_key: str) -> str:
    """An embedding space's key as it appears in its tables' names."""
    return re.sub(r"[^a-z0-9]+", "_", embedding_key.lower()).strip("_")[-80:]


def vectors_table_name(embedding_key: str) -> str:
    return f"vectors__{space_slug(embedding_key)}"


def rows_of_texts(tables: Tables, name: str, hashes: Sequence[str]) -> np.ndarray:
    """Row ids of table `name`'s rows whose text_hash is one of `hashes`, in the order they were written: the
    table's hashes scanned a batch at a time (see `Vectors.cached_vectors`)."""
    if not tables.has(name) or not len(hashes):
        return np.empty(0, np.uint64)
    table = tables.db.open_table(name)
    wanted = pa.array(sorted(set(hashes)), pa.string())
    rows = [
        batch["_rowid"].to_numpy()[pc.is_in(batch["text_hash"], value_set=wanted).to_numpy(zero_copy_only=False)]
        for batch in tables.batches(name, table.search().select(["text_hash"]).with_row_id(True), READ_ROWS)
    ]
    return np.sort(np.concatenate(rows)) if rows else np.empty(0, np.uint64)


class Vectors(Datasets):
    def cached_vectors(self, embedding_key: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors already computed for these text hashes in this embedding space (any dataset). The table's
        hashes are scanned a batch at a time and only the vectors found are read: a filter listing the hashes kept
        memory growing with every lookup (about 220 MB over an embedding of 200,000 documents)."""
        name = vectors_table_name(embedding_key)
        found = rows_of_texts(self.tables, name, hashes)
        if not len(found):
            return {}
        with reading(name):
            stored = self.db.open_table(name).take_row_ids(found.tolist()).select(["text_hash", "vector"]).to_arrow()
        vectors = stored["vector"].combine_chunks().flatten().to_numpy().reshape(len(stored), -1)
        return dict(zip(stored["text_hash"].to_pylist(), vectors.astype(np.float32), strict=True))

    def has_vectors(self, dataset_id: str, embedding_key: str) -> bool:
        return len(self.stored_positions(dataset_id, embedding_key)) == self.dataset(dataset_id).n_documents

    def save_vectors(
        self, dataset_id: str, embedding_key: str, vectors: np.ndarray, positions: np.ndarray | None = None
    ) -> None:
        """Vectors of the documents at `positions` (every document, in order, when None). A dataset's vectors may be
        written in slices as they are computed, so an interrupted embedding resumes from `stored_positions`;
        positions already stored are skipped, and nothing is ever deleted first, so a reader never loses vectors.

        Two processes embedding the same dataset at once may both write a position; the copy written second is then
        removed (readers skip it meanwhile).
        """
        if positions is None:
            positions = np.arange(self.dataset(dataset_id).n_documents)
        positions = np.asarray(positions, dtype=np.int64)
        if len(positions) != len(vectors):
            raise StoreError(f"Got {len(vectors)} vectors for {len(positions)} documents.")
        if not len(positions):
            return
        name = vectors_table_name(embedding_key)
        span = _span(dataset_id, positions)
        new = ~np.isin(positions, self.tables.read(name, span, ["position"])["position"].to_numpy(dtype=np.int64))
        if not new.any():
            return
        docs = self.tables.read("documents", span, ["position", "doc_id", "text_hash"]).set_index("position")
        docs = docs.loc[positions[new]]
        rows = _vector_rows(dataset_id, positions[new], docs["doc_id"].tolist(), docs["text_hash"], vectors[new])
        self.tables.add(name, rows, rows.schema)
        self._remove_second_copies(name, span)
        self._maybe_index(name)

    def stored_positions(self, dataset_id: str, embedding_key: str) -> set[int]:
        """Positions of the dataset's documents whose vectors in this space are stored."""
        name = vectors_table_name(embedding_key)
        if not self.tables.has(name):
            return set()
        return set(self.tables.read(name, _dataset_rows(dataset_id), ["position"])["position"].tolist())

    def cache_text_vectors(self, embedding_key: str, hashes: Sequence[str], vectors: np.ndarray) -> None:
        """Vectors of texts outside any dataset (labels, keyword candidates), kept in the same embedding cache so
        `cached_vectors` finds them again; they belong to no dataset (empty dataset id, position -1)."""
        if len(hashes) != len(vectors):
            raise StoreError(f"Got {len(vectors)} vectors for {len(hashes)} texts.")
        if len(hashes):
            rows = _vector_rows("", np.full(len(hashes), -1), [""] * len(hashes), hashes, vectors)
            self.tables.add(vectors_table_name(embedding_key), rows, rows.schema)

    def _remove_second_copies(self, name: str, where: str) -> None:
        """Keeps the first-written row of each document position among the rows `where` selects (every process
        picks the same rows to drop)."""
        if not self.tables.read(name, where, ["position"])["position"].duplicated().any():
            return  # the usual case, checked without row ids (a scan with them kept memory as the table grew)
        rows = self._positions_oldest_first(name, where)
        extra = rows.loc[rows["position"].duplicated(), "_rowid"]
        if len(extra):
            self.tables.delete(
                name, f"_rowid IN ({', '.join(str(int(row_id)) for row_id in extra)})", count_first=False
            )

    def _positions_oldest_first(self, name: str, where: str) -> pd.DataFrame:
        """position and _rowid of the rows `where` selects in a vectors table, in the order they were written."""
        with reading(name):
            query = self.db.open_table(name).search().where(where).select(["position"]).with_row_id(True)
            return query.limit(None).to_pandas().sort_values("_rowid")

    def vectors(self, dataset_id: str, embedding_key: str) -> np.ndarray:
        """[n_documents, d] float32 in document order, read in slices into one array: through a pandas column of
        per-row arrays, reading 200,000 vectors (300 MB) peaked at 2.2 GB instead of 1.2 (BENCHMARKS.md, section 12)."""
        return self.stored_vectors(dataset_id, embedding_key).all()

    def stored_vectors(self, dataset_id: str, embedding_key: str) -> StoredVectors:
        """The dataset's vectors in this space, to read by position a slice at a time (see `StoredVectors`); reads
        only each document's row id."""
        name = vectors_table_name(embedding_key)
        n_documents = self.dataset(dataset_id).n_documents
        if not self.tables.has(name):
            raise NotFoundError(NOT_EMBEDDED)
        table = self.db.open_table(name)
        rows = (
            self._positions_oldest_first(name, _dataset_rows(dataset_id))
            .drop_duplicates("position")  # the first-written copy, the one `_remove_second_copies` keeps
            .sort_values("position")
        )
        if len(rows) != n_documents or not np.array_equal(rows["position"].to_numpy(), np.arange(n_documents)):
            raise NotFoundError(NOT_EMBEDDED)
        dim = table.schema.field("vector").type.list_size
        return StoredVectors(table, rows["_rowid"].to_numpy(dtype=np.uint64), dim)

    def search_documents(self, dataset_id: str, embedding_key: str, query: np.ndarray, limit: int = 10) -> pd.DataFrame:
        """Nearest documents by cosine distance: position, doc_id, distance."""
        name = vectors_table_name(embedding_key)
        with reading(name):
            return self._nearest(name, dataset_id, query, limit)

    def _nearest(self, name: str, dataset_id: str, query: np.ndarray, limit: int) -> pd.DataFrame:
        return (
            self.db.open_table(name)
            .search(np.asarray(query, dtype=np.float32))
            .distance_type("cosine")
            .where(f"dataset_id = '{check_id(dataset_id)}'", prefilter=True)
            .nprobes(SEARCH_NPROBES)
            .refine_factor(SEARCH_REFINE)
            .select(["position", "doc_id", "_distance"])
            .limit(limit)
            .to_pandas()
            .rename(columns={"_distance": "distance"})
        )

    def save_document_map(self, dataset_id: str, embedding_key: str, positions: pd.DataFrame) -> None:
        """The map of the dataset's documents in this space (`positions`: position, x, y; see
        `explore.document_map`), drawn once and kept. Saved twice (two sessions drawing it at once), one copy stays."""
        rows = pa.table(
            {
                "dataset_id": [check_id(dataset_id)] * len(positions),
                "embedding_key": [embedding_key] * len(positions),
                "position": positions["position"].to_numpy(np.int64),
                "x": positions["x"].to_numpy(np.float32),
                "y": positions["y"].to_numpy(np.float32),
            },
            schema=SCHEMAS["maps"],
        )
        merge = (
            self.tables.table("maps")
            .merge_insert(["dataset_id", "embedding_key", "position"])
            .when_matched_update_all()
            .when_not_matched_insert_all()
        )
        retry(lambda: merge.execute(rows), self.uri)

    def remove_document_maps(self, dataset_id: str) -> None:
        """Forget the dataset's maps (every space): documents were added, so the next view draws them again."""
        self.tables.delete("maps", _dataset_rows(dataset_id))

    def saved_document_map(self, dataset_id: str, embedding_key: str) -> pd.DataFrame:
        """position, x, y of the dataset's map in this space, in position order; empty until it is drawn."""
        where = f"{_dataset_rows(dataset_id)} AND embedding_key = '{_quoted(embedding_key)}'"
        frame = self.tables.read("maps", where, ["position", "x", "y"])
        return frame.sort_values("position").reset_index(drop=True)

    def _maybe_index(self, name: str) -> None:
        """Past INDEX_MIN_ROWS vectors an IVF-PQ index keeps search fast; below it exact search is fast enough."""
        from lancedb.index import IvfPq  # lancedb is imported once a workspace opens (store/lancedb_import.py)

        table = self.db.open_table(name)
        rows = table.count_rows()
        if rows >= INDEX_MIN_ROWS and not table.list_indices():
            table.create_index("vector", config=IvfPq(distance_type="cosine", num_partitions=int(np.sqrt(rows))))


def _quoted(value: str) -> str:
    """A string for a LanceDB filter, its quotes doubled."""
    return value.replace("'", "''")


def _dataset_rows(dataset_id: str) -> str:
    return f"dataset_id = '{check_id(dataset_id)}'"


def _span(dataset_id: str, positions: np.ndarray) -> str:
    """The filter of a dataset's rows from the first to the last of these positions: a slice of an embedding is a
    run of positions, so reading its span reads about the slice, not the dataset."""
    return f"{_dataset_rows(dataset_id)} AND position >= {int(positions.min())} AND position <= {int(positions.max())}"


def _vector_rows(
    dataset_id: str, positions: np.ndarray, doc_ids: Sequence[str], hashes: Sequence[str], vectors: np.ndarray
) -> pa.Table:
    """Rows of a vectors table: one per document (or cached text), its vector a fixed-size list of float32."""
    schema = pa.schema(
        [
            ("dataset_id", pa.string()),
            ("position", pa.int64()),
            ("doc_id", pa.string()),
            ("text_hash", pa.string()),
            ("vector", pa.list_(pa.float32(), vectors.shape[1])),
        ]
    )
    columns = {
        "dataset_id": [dataset_id] * len(positions),
        "position": np.asarray(positions, dtype=np.int64),
        "doc_id": list(doc_ids),
        "text_hash": list(hashes),
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.astype(np.float32).ravel()), vectors.shape[1]),
    }
    return pa.table(columns, schema=schema)
