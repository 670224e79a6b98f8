"""Passages of documents per embedding space (how they are cut and pooled: `prisma_core.embed.passages`), kept like
the embedding cache, by the text's hash: equal texts share their passages across datasets.

One table per space, `passages__v<PASSAGE_FORMAT>__<space>`: text_hash, number, start, end, n_tokens and the vector at
float16 (half the disk of float32, 768 bytes a passage at 384 dimensions; cosine to the float32 vector above 0.99999).
Embedding writes a slice's passages before its document vectors, so a document with a stored vector has its passages
(up to the pipeline's cap, `pipeline.passage_cap`); a text whose passages were written twice (an embedding killed
between the two writes and resumed, or two processes at once) is read once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from prisma_core.store.datasets import BATCH_ROWS, POSITIONS_PER_QUERY
from prisma_core.store.ids import check_id
from prisma_core.store.schemas import Passages, concatenate_passages
from prisma_core.store.tables import Tables, reading
from prisma_core.store.vectors import rows_of_texts, space_slug

PASSAGE_FORMAT = 1
"""In the tables' names: bumped when passages are cut differently, so that passages cut two ways never mix."""
_COLUMNS = ["text_hash", "number", "start", "end", "n_tokens", "vector"]


def passages_table_name(embedding_key: str) -> str:
    return f"passages__v{PASSAGE_FORMAT}__{space_slug(embedding_key)}"


def _passage_schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            ("text_hash", pa.string()),
            ("number", pa.int32()),
            ("start", pa.int64()),
            ("end", pa.int64()),
            ("n_tokens", pa.int32()),
            ("vector", pa.list_(pa.float16(), dim)),
        ]
    )


@dataclass
class PassageStore:
    """`Workspace.passages`."""

    tables: Tables

    def save(self, embedding_key: str, hashes: Sequence[str], passages: Passages) -> None:
        """Stores the passages of texts: `passages.position` is the index of each passage's text in `hashes`."""
        if not len(passages):
            return
        dim = passages.vectors.shape[1]
        schema = _passage_schema(dim)
        rows = pa.table(
            {
                "text_hash": np.asarray(hashes, dtype=object)[passages.position].tolist(),
                "number": passages.number.astype(np.int32),
                "start": passages.start.astype(np.int64),
                "end": passages.end.astype(np.int64),
                "n_tokens": passages.n_tokens.astype(np.int32),
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(passages.vectors.astype(np.float16).ravel()), dim),
            },
            schema=schema,
        )
        self.tables.add(passages_table_name(embedding_key), rows, schema)

    def cached(self, embedding_key: str, hashes: Sequence[str]) -> Passages:
        """The stored passages of these texts, `position` the index of each passage's text in `hashes` (given once
        each), ordered by text, then number; texts without stored passages have none here."""
        name = passages_table_name(embedding_key)
        found = rows_of_texts(self.tables, name, hashes)
        if not len(found):
            return concatenate_passages([], 0)
        with reading(name):
            stored = self.tables.db.open_table(name).take_row_ids(found.tolist()).select(_COLUMNS).to_arrow()
        text = pc.index_in(stored["text_hash"], value_set=pa.array(list(hashes), pa.string())).to_numpy()
        number = stored["number"].to_numpy()
        order = np.lexsort((number, text))
        first = order[np.r_[True, (np.diff(text[order]) != 0) | (np.diff(number[order]) != 0)]]  # a copy written twice
        vectors = stored["vector"].combine_chunks().flatten().to_numpy().reshape(len(stored), -1)
        return Passages(
            text[first].astype(np.int64),
            number[first].astype(np.int32),
            stored["start"].to_numpy()[first],
            stored["end"].to_numpy()[first],
            stored["n_tokens"].to_numpy()[first],
            vectors[first].astype(np.float32),
        )

    def rows(self, embedding_key: str) -> int:
        """Passages stored in this space, for every dataset (a count the table keeps: nothing is read)."""
        name = passages_table_name(embedding_key)
        return self.tables.db.open_table(name).count_rows() if self.tables.has(name) else 0

    def count(self, embedding_key: str, hashes: Sequence[str]) -> int:
        """Passages stored in this space for these texts (one scan of the table's hashes)."""
        return len(rows_of_texts(self.tables, passages_table_name(embedding_key), hashes))

    def texts_only_in(self, dataset_id: str) -> list[str]:
        """The text hashes of the dataset's documents that no other dataset's documents have (the other datasets'
        hashes scanned a batch at a time): those whose passages go with the dataset (`Workspace.delete_dataset`)."""
        dataset = f"dataset_id = '{check_id(dataset_id)}'"  # every row left, even of a dataset a repair cut short
        own = pa.array(self.tables.read("documents", dataset, ["text_hash"])["text_hash"].unique(), pa.string())
        if not len(own):
            return []
        query = self.tables.db.open_table("documents").search().where(f"NOT ({dataset})")
        shared: set[str] = set()
        for batch in self.tables.batches("documents", query.select(["text_hash"]), 4 * BATCH_ROWS):
            shared.update(pc.filter(batch["text_hash"], pc.is_in(batch["text_hash"], value_set=own)).to_pylist())
        return sorted(set(own.to_pylist()) - shared)

    def delete_texts(self, hashes: Sequence[str]) -> None:
        """The passages of these texts, in every space."""
        for name in self.tables.db.list_tables().tables:
            if name.startswith("passages__"):
                for start in range(0, len(hashes), POSITIONS_PER_QUERY):
                    quoted = ", ".join(f"'{text}'" for text in hashes[start : start + POSITIONS_PER_QUERY])
                    self.tables.delete(name, f"text_hash IN ({quoted})")
