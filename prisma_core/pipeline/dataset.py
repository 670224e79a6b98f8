"""The stages before a run: files read into a dataset, the dataset embedded (cached by text hash)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from prisma_core.embed import EmbedConfig, embed_documents, model_key
from prisma_core.ingest import DocumentStream, IngestConfig, IngestReport, Source
from prisma_core.lineage import record_stage
from prisma_core.progress import Progress, ProgressCallback, ignore_progress
from prisma_core.store import Workspace


@dataclass(frozen=True)
class EmbedSummary:
    embedding_key: str
    n_documents: int
    n_cached: int
    n_computed: int
    n_chunks: int
    n_tokens: int
    seconds: float


def ingest(
    workspace: Workspace,
    files: Sequence[str | Path] | Sequence[Source],
    name: str | None = None,
    config: IngestConfig = IngestConfig(),
    progress: ProgressCallback = ignore_progress,
) -> tuple[str, IngestReport]:
    """Read files (paths, or (name, bytes) uploads) into a new dataset. Nothing is stored unless all files read.

    Parquet, CSV, TSV and JSON lines files on disk are read and stored `config.batch_rows` rows at a time, so memory
    does not grow with their size (see ingest/stream.py); uploads and other formats are read whole."""
    uploads = bool(files) and isinstance(files[0], tuple)
    if uploads:
        stream = DocumentStream.of_sources(files, config, progress)  # type: ignore[arg-type]
    else:
        stream = DocumentStream.of_paths(files, config, progress)  # type: ignore[arg-type]
    dataset_id = workspace.add_dataset_batches(
        name or Path(stream.names[0]).stem, stream.documents(), stream.names, lambda: asdict(stream.report)
    )
    report = stream.report
    summary = {"n_documents": report.n_documents, "files": report.files}
    record_stage(workspace, "ingest", "", dataset_id, asdict(config), summary, record_id=dataset_id)
    return dataset_id, report


SLICE_DOCUMENTS = 2048
"""Documents embedded between two writes: an interrupted embedding loses at most this much work, and memory holds one
slice's chunks at a time (windows are sorted by length within a slice, which costs almost no speed)."""


@dataclass(frozen=True)
class ComputedSlice:
    """Vectors just computed (text hash -> vector), with the windows and tokens it took."""

    vectors: dict[str, np.ndarray]
    n_chunks: int
    n_tokens: int


ComputeSlices = Callable[[pd.DataFrame, ProgressCallback, int], Iterator[ComputedSlice]]
"""Embeds the texts of (text_hash, text) rows and yields their vectors a slice (at least that many documents, or the
last ones) at a time, as they are computed."""


def embed_dataset(
    workspace: Workspace,
    dataset_id: str,
    config: EmbedConfig = EmbedConfig(),
    progress: ProgressCallback = ignore_progress,
    slice_documents: int = SLICE_DOCUMENTS,
) -> EmbedSummary:
    """Embed every document, computing only texts this embedding space has never seen (cache by text hash). Vectors
    are stored slice by slice, so after a crash or a cancel embedding again resumes where it stopped.

    With `config.ray_address` the texts are embedded on that Ray cluster (pipeline/ray_embedding.py, which imports
    ray), into the same vector space; without, on this machine."""
    if not config.ray_address:
        local = functools.partial(_local_slices, config)
        return _embed_dataset(workspace, dataset_id, config, progress, slice_documents, local)
    from prisma_core.pipeline import ray_embedding

    with ray_embedding.connected(config.ray_address) as cluster:
        return _embed_dataset(workspace, dataset_id, config, progress, slice_documents, cluster.embedding(config))


def _embed_dataset(
    workspace: Workspace,
    dataset_id: str,
    config: EmbedConfig,
    progress: ProgressCallback,
    slice_documents: int,
    compute: ComputeSlices,
) -> EmbedSummary:
    started = time.perf_counter()
    key = model_key(config)
    docs = workspace.documents(dataset_id, ["position", "text", "text_hash"])
    todo = docs[~docs["position"].isin(workspace.stored_positions(dataset_id, key))]
    if todo.empty:
        progress(Progress("embed", len(docs), len(docs), "all documents already embedded"))
        return EmbedSummary(key, len(docs), len(docs), 0, 0, 0, time.perf_counter() - started)
    cached = workspace.cached_vectors(key, todo["text_hash"].unique().tolist())
    _save_known(workspace, dataset_id, key, todo, cached)
    missing = todo[~todo["text_hash"].isin(cached)].drop_duplicates("text_hash")
    n_chunks = n_tokens = 0
    for computed in compute(missing[["text_hash", "text"]], progress, slice_documents):
        _save_known(workspace, dataset_id, key, todo, computed.vectors)
        n_chunks += computed.n_chunks
        n_tokens += computed.n_tokens
    summary = EmbedSummary(
        embedding_key=key,
        n_documents=len(docs),
        n_cached=len(docs) - int(todo["text_hash"].isin(missing["text_hash"]).sum()),
        n_computed=len(missing),
        n_chunks=n_chunks,
        n_tokens=n_tokens,
        seconds=time.perf_counter() - started,
    )
    record_stage(workspace, "embedding", dataset_id, dataset_id, asdict(config), asdict(summary))
    return summary


def _local_slices(
    config: EmbedConfig, missing: pd.DataFrame, progress: ProgressCallback, slice_documents: int
) -> Iterator[ComputedSlice]:
    """Embeds on this machine, `slice_documents` texts at a time."""
    for start in range(0, len(missing), slice_documents):
        part = missing.iloc[start : start + slice_documents]
        report = _slice_progress(progress, start, len(part), len(missing))
        embedded = embed_documents(part["text"].tolist(), config, report)
        yield ComputedSlice(
            dict(zip(part["text_hash"], embedded.vectors, strict=True)),
            int(embedded.chunking.chunks_per_doc.sum()),
            int(embedded.chunking.tokens_per_doc.sum()),
        )


def _save_known(
    workspace: Workspace, dataset_id: str, key: str, todo: pd.DataFrame, known: dict[str, np.ndarray]
) -> None:
    """Stores the vectors of every document still to do whose text has a vector in `known`."""
    rows = todo[todo["text_hash"].isin(known)]
    if len(rows):
        vectors = np.stack([known[text_hash] for text_hash in rows["text_hash"]])
        workspace.save_vectors(dataset_id, key, vectors, rows["position"].to_numpy())


def _slice_progress(progress: ProgressCallback, start: int, size: int, total: int) -> ProgressCallback:
    """A slice's progress (tokens of the slice) reported as documents of the whole embedding."""

    def report(event: Progress) -> None:
        report_documents(progress, start + round(size * event.done / max(event.total, 1)), total)

    return report


def report_documents(progress: ProgressCallback, done: int, total: int) -> None:
    """Reports `done` of the `total` documents to embed."""
    progress(Progress("embed", done, total, f"{done:,} of {total:,} documents"))
