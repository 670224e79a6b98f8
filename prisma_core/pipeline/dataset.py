"""The stages before a run: files read into a dataset, the dataset embedded (cached by text hash)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from prisma_core.embed import EmbedConfig, embed_documents, model_key
from prisma_core.ingest import IngestConfig, IngestedDataset, Source, read_paths, read_sources
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
) -> tuple[str, IngestedDataset]:
    """Read files (paths, or (name, bytes) uploads) into a new dataset. Nothing is stored unless all files read."""
    uploads = bool(files) and isinstance(files[0], tuple)
    dataset = read_sources(files, config) if uploads else read_paths(files, config)  # type: ignore[arg-type]
    default_name = Path(dataset.report.files[0]).stem if dataset.report.files else "dataset"
    dataset_id = workspace.add_dataset(
        name or default_name,
        dataset.documents,
        dataset.report.files,
        asdict(dataset.report),
    )
    summary = {"n_documents": len(dataset.documents), "files": dataset.report.files}
    record_stage(workspace, "ingest", "", dataset_id, asdict(config), summary, record_id=dataset_id)
    return dataset_id, dataset


def embed_dataset(
    workspace: Workspace,
    dataset_id: str,
    config: EmbedConfig = EmbedConfig(),
    progress: ProgressCallback = ignore_progress,
) -> EmbedSummary:
    """Embed every document, computing only texts this embedding space has never seen (cache by text hash)."""
    started = time.perf_counter()
    key = model_key(config)
    docs = workspace.documents(dataset_id, ["position", "text", "text_hash"])
    if workspace.has_vectors(dataset_id, key):
        progress(Progress("embed", len(docs), len(docs), "all documents already embedded"))
        return EmbedSummary(key, len(docs), len(docs), 0, 0, 0, time.perf_counter() - started)
    cached = workspace.cached_vectors(key, docs["text_hash"].unique().tolist())
    missing = docs[~docs["text_hash"].isin(cached)].drop_duplicates("text_hash")
    n_cached = int(docs["text_hash"].isin(cached).sum())
    n_chunks = n_tokens = 0
    if len(missing):
        embedded = embed_documents(missing["text"].tolist(), config, progress)
        cached.update(zip(missing["text_hash"], embedded.vectors, strict=True))
        n_chunks, n_tokens = (
            int(embedded.chunking.chunks_per_doc.sum()),
            int(embedded.chunking.tokens_per_doc.sum()),
        )
    workspace.save_vectors(dataset_id, key, np.stack([cached[h] for h in docs["text_hash"]]))
    summary = EmbedSummary(
        embedding_key=key,
        n_documents=len(docs),
        n_cached=n_cached,
        n_computed=len(missing),
        n_chunks=n_chunks,
        n_tokens=n_tokens,
        seconds=time.perf_counter() - started,
    )
    record_stage(workspace, "embedding", dataset_id, dataset_id, asdict(config), asdict(summary))
    return summary
