"""The stages before a run: files read into a dataset, the dataset embedded (cached by text hash), with the
documents' passages (stored before the vectors of the same slice; `pipeline.passages` reads them)."""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from prisma_core.embed import EmbedConfig, embed_documents, model_key
from prisma_core.embed.faithful import PrecisionChoice, fast_candidates
from prisma_core.ingest import DocumentStream, IngestConfig, IngestReport, Source
from prisma_core.ingest.documents import unique_ids
from prisma_core.lineage import record_stage
from prisma_core.names import MAX_NAME_CHARS, checked_name, snippet
from prisma_core.pipeline.embedding_choice import precision_choice
from prisma_core.pipeline.passage_cap import PassageCap
from prisma_core.pipeline.slices import ComputedSlice, ComputeSlices, report_documents
from prisma_core.progress import Progress, ProgressCallback, ignore_progress
from prisma_core.store import Workspace
from prisma_core.store.stages import APPEND, EMBEDDING, INGEST


@dataclass(frozen=True)
class EmbedSummary:
    embedding_key: str
    n_documents: int
    n_cached: int
    n_computed: int
    n_chunks: int
    n_tokens: int
    seconds: float
    n_passages: int = 0  # passages stored
    choice: PrecisionChoice | None = None  # the backend and precision embedded with, and why


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
    stream = _document_stream(files, config, progress)
    name = checked_name(name, "The dataset's name") if name else snippet(Path(stream.names[0]).stem, MAX_NAME_CHARS)
    dataset_id = workspace.add_dataset_batches(name, stream.documents(), stream.names, lambda: asdict(stream.report))
    report = stream.report
    summary = {"n_documents": report.n_documents, "files": report.files}
    record_stage(workspace, INGEST, "", dataset_id, asdict(config), summary, record_id=dataset_id)
    return dataset_id, report


def _document_stream(
    files: Sequence[str | Path] | Sequence[Source], config: IngestConfig, progress: ProgressCallback
) -> DocumentStream:
    if files and isinstance(files[0], tuple):
        return DocumentStream.of_sources(files, config, progress)  # type: ignore[arg-type]
    return DocumentStream.of_paths(files, config, progress)  # type: ignore[arg-type]


@dataclass(frozen=True)
class AddedDocuments:
    n_added: int
    n_documents: int  # the dataset's, after
    already_there: list[str]  # ids of documents skipped: the dataset holds their text already
    renamed_ids: dict[str, str]  # new id -> the id of the dataset's it repeated ("7#2" -> "7")
    report: IngestReport


def add_documents(
    workspace: Workspace,
    dataset_id: str,
    files: Sequence[str | Path] | Sequence[Source],
    config: IngestConfig | None = None,
    progress: ProgressCallback = ignore_progress,
) -> AddedDocuments:
    """Read files into an existing dataset, after its documents, with the settings it was read with unless `config`
    is given. Documents whose text the dataset holds already are skipped; an id it holds already gets a suffix
    ("7" -> "7#2"). The dataset's runs stay as they were until `place_new_documents` encodes the new documents."""
    config = config or _ingest_settings(workspace, dataset_id)
    with workspace.adding_documents(dataset_id):  # before the dataset's documents are read: as this addition finds them
        stream = _document_stream(files, config, progress)
        known = workspace.documents(dataset_id, ["doc_id", "text_hash"])
        new = _NewDocuments(set(known["doc_id"]), set(known["text_hash"]))
        del known
        n_added = workspace.append_documents(dataset_id, new.of(stream.documents()), stream.names)
        if n_added:
            workspace.remove_document_maps(dataset_id)  # drawn again, with the new documents, when next shown
        n_documents = workspace.dataset(dataset_id).n_documents
        summary = {"n_added": n_added, "n_documents": n_documents, "n_already_there": len(new.already_there)}
        record_stage(workspace, APPEND, dataset_id, dataset_id, asdict(config), summary | {"files": stream.names})
    return AddedDocuments(n_added, n_documents, new.already_there, new.renamed_ids, stream.report)


def _ingest_settings(workspace: Workspace, dataset_id: str) -> IngestConfig:
    """The settings the dataset was read with (the defaults for a dataset made before they were recorded)."""
    read = [stage for stage in workspace.stage_records.of(dataset_id) if stage.stage == INGEST]
    return IngestConfig.from_dict(read[-1].config) if read else IngestConfig()


@dataclass
class _NewDocuments:
    """Filters batches of documents to those whose text a dataset lacks, giving ids it holds already a suffix."""

    ids: set[str]
    hashes: set[str]
    already_there: list[str] = field(default_factory=list)
    renamed_ids: dict[str, str] = field(default_factory=dict)

    def of(self, batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            known = batch["text_hash"].isin(self.hashes)
            self.already_there += batch.loc[known, "doc_id"].tolist()
            batch = batch.loc[~known].drop_duplicates("text_hash").reset_index(drop=True)
            if batch.empty:
                continue
            given = batch["doc_id"].astype(str).tolist()
            ids, renamed = unique_ids([*self.ids, *given])
            fresh = ids[len(self.ids) :]
            self.renamed_ids |= {new: renamed[new] for new in fresh if new in renamed}
            self.ids.update(fresh)
            self.hashes.update(batch["text_hash"])
            yield batch.assign(doc_id=fresh)


SLICE_DOCUMENTS = 2048
"""Documents embedded between two writes: an interrupted embedding loses at most this much work, and memory holds one
slice's chunks at a time (windows are sorted by length within a slice, which costs almost no speed)."""
WINDOW_DOCUMENTS = 8 * SLICE_DOCUMENTS
"""Documents read from the store at a time to be embedded: memory holds one window's texts (about 40 MB of
2,500-character documents), not the dataset's."""


def embed_dataset(
    workspace: Workspace,
    dataset_id: str,
    config: EmbedConfig = EmbedConfig(),
    progress: ProgressCallback = ignore_progress,
    slice_documents: int = SLICE_DOCUMENTS,
) -> EmbedSummary:
    """Embed every document, computing only texts this embedding space has never seen (cache by text hash). Vectors
    are stored slice by slice, so after a crash or a cancel embedding again resumes where it stopped. The passages of
    the texts computed here are stored with them, before them (up to `passage_cap.MAX_STORED_PASSAGES`).

    With `config.ray_address` the texts are embedded on that Ray cluster (pipeline/ray_embedding.py, which imports
    ray), into the same vector space, without passages (`pipeline.passages` computes them when asked); without, on
    this machine.

    `auto` embeds at a faster precision only where it keeps a sample of this dataset's documents faithful to fp32
    (`embedding_choice`); the choice and its reason are in the summary and the embedding's record."""

    def loading_to_check() -> None:  # the check loads the model (on a fresh machine, converts it) before any vector
        n_documents = workspace.dataset(dataset_id).n_documents
        progress(Progress("embed", 0, n_documents, f"0 of {n_documents:,} documents: loading the embedding model"))

    choice = precision_choice(workspace, dataset_id, config, loading_to_check)
    chosen = choice.config(config) if fast_candidates(config) else config
    if not config.ray_address:
        local = functools.partial(_local_slices, chosen)
        return embed_with(workspace, dataset_id, config, progress, slice_documents, local, choice)
    from prisma_core.pipeline import ray_embedding

    with ray_embedding.connected(config.ray_address) as cluster:
        compute = cluster.embedding(chosen)
        return embed_with(workspace, dataset_id, config, progress, slice_documents, compute, choice)


def embed_with(
    workspace: Workspace,
    dataset_id: str,
    config: EmbedConfig,
    progress: ProgressCallback,
    slice_documents: int,
    compute: ComputeSlices,
    choice: PrecisionChoice | None = None,
) -> EmbedSummary:
    """`embed_dataset` with the texts embedded by `compute` (this machine's or a cluster's; a benchmark's stand-in):
    reads the documents a window at a time (their texts are never all in memory) and has `compute` embed each
    window's texts that neither this dataset nor the cache has a vector for, in the space of `choice` (the backend
    and precision `embed_dataset` chose; `config` as it resolves without)."""
    started = time.perf_counter()
    key = model_key(config if choice is None else choice.config(config))
    n_documents = workspace.dataset(dataset_id).n_documents
    stored = np.fromiter(workspace.stored_positions(dataset_id, key), dtype=np.int64)
    if len(stored) == n_documents:
        progress(Progress("embed", n_documents, n_documents, "all documents already embedded"))
        return EmbedSummary(key, n_documents, n_documents, 0, 0, 0, time.perf_counter() - started, choice=choice)
    n_todo = n_documents - len(stored)
    # said before the model loads (and, on a fresh machine, is converted): storing the documents is over
    progress(Progress("embed", 0, n_todo, f"0 of {n_todo:,} documents: loading the embedding model"))
    cap = PassageCap(workspace, dataset_id, key)
    windows = _Windows(workspace, dataset_id, key, compute, slice_documents, progress, n_todo, cap)
    for window in workspace.document_batches(dataset_id, ["position", "text", "text_hash"], WINDOW_DOCUMENTS):
        windows.embed(window[~window["position"].isin(stored)].sort_values("position"))
    summary = EmbedSummary(
        embedding_key=key,
        n_documents=n_documents,
        n_cached=n_documents - windows.computed_documents,
        n_computed=windows.computed_texts,
        n_chunks=windows.chunks,
        n_tokens=windows.tokens,
        seconds=time.perf_counter() - started,
        n_passages=windows.passages,
        choice=choice,
    )
    record_stage(workspace, EMBEDDING, dataset_id, dataset_id, asdict(config), asdict(summary))
    return summary


@dataclass
class _Windows:
    """Embeds a dataset's documents still to do a window at a time, counting what it did."""

    workspace: Workspace
    dataset_id: str
    key: str
    compute: ComputeSlices
    slice_documents: int
    progress: ProgressCallback
    n_todo: int
    cap: PassageCap
    done: int = 0
    computed_texts: int = 0
    computed_documents: int = 0
    chunks: int = 0
    tokens: int = 0
    passages: int = 0

    def embed(self, todo: pd.DataFrame) -> None:
        """Stores the vectors of these documents (position, text, text_hash): the cached ones first, then those
        `compute` embeds, a slice at a time, each slice's passages before its vectors."""
        if todo.empty:
            return
        cached = self.workspace.cached_vectors(self.key, todo["text_hash"].unique().tolist())
        _save_known(self.workspace, self.dataset_id, self.key, todo, cached)
        missing = todo[~todo["text_hash"].isin(cached)].drop_duplicates("text_hash")
        if len(missing):
            progress = _offset_progress(self.progress, self.done + len(todo) - len(missing), self.n_todo)
            for computed in self.compute(missing[["text_hash", "text"]], progress, self.slice_documents):
                if computed.passages is not None and computed.hashes is not None:
                    self.passages += self.cap.store(computed.hashes, computed.passages)
                _save_known(self.workspace, self.dataset_id, self.key, todo, computed.vectors)
                self.chunks += computed.n_chunks
                self.tokens += computed.n_tokens
        self.done += len(todo)
        self.computed_texts += len(missing)
        self.computed_documents += int(todo["text_hash"].isin(missing["text_hash"]).sum())
        report_documents(self.progress, self.done, self.n_todo)


def _local_slices(
    config: EmbedConfig, missing: pd.DataFrame, progress: ProgressCallback, slice_documents: int
) -> Iterator[ComputedSlice]:
    """Embeds on this machine, `slice_documents` texts at a time."""
    for start in range(0, len(missing), slice_documents):
        part = missing.iloc[start : start + slice_documents]
        report = _slice_progress(progress, start, len(part), len(missing))
        embedded = embed_documents(part["text"].tolist(), config, report, passages=True)
        yield ComputedSlice(
            dict(zip(part["text_hash"], embedded.vectors, strict=True)),
            int(embedded.chunking.chunks_per_doc.sum()),
            int(embedded.chunking.tokens_per_doc.sum()),
            part["text_hash"].tolist(),
            embedded.passages,
        )


def _save_known(
    workspace: Workspace, dataset_id: str, key: str, todo: pd.DataFrame, known: dict[str, np.ndarray]
) -> None:
    """Stores the vectors of every document still to do whose text has a vector in `known`."""
    rows = todo[todo["text_hash"].isin(known)]
    if len(rows):
        vectors = np.stack([known[text_hash] for text_hash in rows["text_hash"]])
        workspace.save_vectors(dataset_id, key, vectors, rows["position"].to_numpy())


def _offset_progress(progress: ProgressCallback, done_before: int, total: int) -> ProgressCallback:
    """A window's progress (documents of the window) reported as documents of the whole embedding."""

    def report(event: Progress) -> None:
        report_documents(progress, done_before + event.done, total)

    return report


def _slice_progress(progress: ProgressCallback, start: int, size: int, total: int) -> ProgressCallback:
    """A slice's progress (tokens of the slice) reported as documents of the whole embedding."""

    def report(event: Progress) -> None:
        report_documents(progress, start + round(size * event.done / max(event.total, 1)), total)

    return report
