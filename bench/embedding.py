"""Benchmark 1: chunk-and-average embedding vs plain `SentenceTransformer.encode`, vs truncation, cold vs warm.

    .venv/bin/python -m bench.embedding [--quick]

- Throughput: Prisma's `embed_documents` (tokenise whole documents, split into windows, batch all windows sorted by
  length, average per document) against plain `encode` over the same windows given to it as pre-split texts, in
  interleaved blocks of documents with the same loaded torch model (both sides on torch: what chunk-and-average
  costs, not what the OpenVINO backend gains, which is benchmark 2). Content tokens per second, ratio Prisma / plain.
- Truncation: what plain `encode` over whole documents never sees (tokens past the 256-token window).
- Cold vs warm, with the default settings: `pipeline.embed_dataset` on a fresh workspace, then again (same dataset),
  then on the same texts ingested as a new dataset (what a re-run of the CLI does): warm / cold speed-up.
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench import common
from prisma_core import pipeline
from prisma_core.embed import (
    EmbedConfig,
    average_by_document,
    embed_documents,
    load_model,
    model_key,
    plan_chunks,
)
from prisma_core.ingest import IngestConfig
from prisma_core.store import Workspace

NAME = "embedding"
TITLE = "1. Embedding: chunk-and-average vs plain encode, vs truncation, cold vs warm"
CACHE_DOCS = 600
"""Documents of the cold/warm comparison in the full run."""
TARGET_RATIO = 0.95
"""Chunk-and-average should keep at least this share of plain encode's throughput."""
TARGET_WARM_SPEEDUP = 100.0
"""A warm (cached) embedding should be at least this many times faster than a cold one."""


def run(quick: bool = False) -> dict[str, Any]:
    config = EmbedConfig(batch_size=common.EMBED_BATCH_SIZE, backend="torch")
    encoder = load_model(config.model, config.device, config.precision)
    ratio_texts = common.speed_texts(quick)
    all_texts = ratio_texts if quick else common.bbc_texts()
    _warm_up(encoder, ratio_texts[:4], config)
    return {
        "device": common.device_report(),
        "space": model_key(config),
        "default_space": model_key(EmbedConfig()),
        "batch_size": common.EMBED_BATCH_SIZE,
        "quick": quick,
        "throughput": _throughput(encoder, ratio_texts, config, common.timed_rounds(quick)),
        "truncation": _truncation(encoder, all_texts),
        "cache": _cold_and_warm(len(ratio_texts) if quick else CACHE_DOCS, EmbedConfig(batch_size=config.batch_size)),
    }


def _warm_up(encoder: Any, texts: list[str], config: EmbedConfig) -> None:
    """First calls pay for kernel selection; neither side should."""
    embed_documents(texts, config)
    encoder.encode(texts, batch_size=config.batch_size)


def _chunk_texts(encoder: Any, chunk_ids: list[list[int]]) -> list[str]:
    """Each window as text, special tokens removed: the pre-split input plain `encode` gets."""
    return encoder.tokenizer.batch_decode(chunk_ids, skip_special_tokens=True)


def _throughput(encoder: Any, texts: list[str], config: EmbedConfig, blocks: int) -> dict[str, Any]:
    """Prisma, plain encode of the windows and plain encode of the whole (truncated) documents take turns over
    blocks of documents, rotating who goes first."""
    chunking = plan_chunks(encoder, texts)
    chunk_texts = _chunk_texts(encoder, chunking.chunk_ids)
    owner = chunking.chunk_owner
    bounds = np.linspace(0, len(texts), blocks + 1).astype(int)
    seconds: dict[str, float] = {"prisma": 0.0, "plain": 0.0, "truncated": 0.0}
    vectors: dict[str, list[np.ndarray]] = {"prisma": [], "plain": [], "truncated": []}
    block_ratios = []
    for number, (start, stop) in enumerate(itertools.pairwise(bounds)):
        block_chunks = [chunk_texts[i] for i in np.flatnonzero((owner >= start) & (owner < stop))]
        runs = {
            "prisma": lambda start=start, stop=stop: embed_documents(texts[start:stop], config).vectors,
            "plain": lambda block_chunks=block_chunks: encoder.encode(block_chunks, batch_size=config.batch_size),
            "truncated": lambda start=start, stop=stop: encoder.encode(texts[start:stop], batch_size=config.batch_size),
        }
        block_seconds = {}
        for name in common.rotated(list(runs), number):
            block_seconds[name], block_vectors = common.timed(runs[name])
            seconds[name] += block_seconds[name]
            vectors[name].append(np.asarray(block_vectors, dtype=np.float32))
        block_ratios.append(block_seconds["plain"] / block_seconds["prisma"])
    tokens = int(chunking.tokens_per_doc.sum())
    prisma_vectors = np.concatenate(vectors["prisma"])
    plain_documents = average_by_document(np.concatenate(vectors["plain"]), owner, len(texts))
    agreement = common.cosine_rows(prisma_vectors, plain_documents)
    long = chunking.chunks_per_doc > 1
    truncated = np.concatenate(vectors["truncated"])
    change = common.cosine_rows(prisma_vectors[long], truncated[long]) if long.any() else np.ones(1)
    return {
        "documents": len(texts),
        "chunks": len(chunking.chunk_ids),
        "content_tokens": tokens,
        "prisma_seconds": seconds["prisma"],
        "plain_seconds": seconds["plain"],
        "truncated_seconds": seconds["truncated"],
        "prisma_tokens_per_s": tokens / seconds["prisma"],
        "plain_tokens_per_s": tokens / seconds["plain"],
        "ratio": seconds["plain"] / seconds["prisma"],
        "block_ratios": block_ratios,
        "median_block_ratio": common.median(block_ratios),
        "agreement_cosine_mean": float(agreement.mean()),
        "agreement_cosine_min": float(agreement.min()),
        "truncation_speedup": seconds["prisma"] / seconds["truncated"],
        "long_document_cosine_mean": float(change.mean()),
        "long_document_cosine_min": float(change.min()),
    }


def _truncation(encoder: Any, texts: list[str]) -> dict[str, Any]:
    """Tokens that plain encode of whole documents never sees (past the model window)."""
    chunking = plan_chunks(encoder, texts)
    tokens = chunking.tokens_per_doc
    unseen = np.clip(tokens - chunking.window, 0, None)
    return {
        "documents": len(texts),
        "window": chunking.window,
        "tokens": int(tokens.sum()),
        "unseen_tokens": int(unseen.sum()),
        "unseen_token_fraction": float(unseen.sum() / tokens.sum()),
        "truncated_document_fraction": float((unseen > 0).mean()),
        "max_unseen_fraction_of_a_document": float((unseen / np.maximum(tokens, 1)).max()),
    }


def _cold_and_warm(n_docs: int, config: EmbedConfig) -> dict[str, Any]:
    """embed_dataset on a fresh workspace (model already loaded), again, and on the same texts as a new dataset."""
    with tempfile.TemporaryDirectory(prefix="prisma-bench-") as folder:
        source = Path(folder) / "bbc_subset.parquet"
        pd.read_parquet(common.bbc_path()).head(n_docs).to_parquet(source)
        workspace = Workspace(Path(folder) / "workspace")
        ingest = IngestConfig(text_column="text", id_column="id")
        first, _ = pipeline.ingest(workspace, [source], "bbc", ingest)
        cold = pipeline.embed_dataset(workspace, first, config)
        same = pipeline.embed_dataset(workspace, first, config)
        second, _ = pipeline.ingest(workspace, [source], "bbc again", ingest)
        new = pipeline.embed_dataset(workspace, second, config)
    return {
        "documents": cold.n_documents,
        "cold_seconds": cold.seconds,
        "cold_tokens_per_s": cold.n_tokens / cold.seconds,
        "warm_same_dataset_seconds": same.seconds,
        "warm_new_dataset_seconds": new.seconds,
        "warm_new_dataset_from_cache": new.n_cached,
        "speedup_same_dataset": cold.seconds / same.seconds,
        "speedup_new_dataset": cold.seconds / new.seconds,
    }


def markdown(result: dict[str, Any]) -> str:
    t, tr, c = result["throughput"], result["truncation"], result["cache"]
    throughput = common.markdown_table(
        ["path", "seconds", "content tokens/s"],
        [
            ["Prisma `embed_documents` (chunk-and-average)", t["prisma_seconds"], t["prisma_tokens_per_s"]],
            [
                "plain `SentenceTransformer.encode` on the same pre-split windows",
                t["plain_seconds"],
                t["plain_tokens_per_s"],
            ],
            ["plain `encode` on whole documents (truncated at the window)", t["truncated_seconds"], "-"],
        ],
    )
    cache = common.markdown_table(
        ["run", "seconds", "speed-up over cold"],
        [
            ["cold (empty workspace, model loaded)", c["cold_seconds"], 1.0],
            ["warm, same dataset", c["warm_same_dataset_seconds"], c["speedup_same_dataset"]],
            [
                "warm, same texts ingested as a new dataset (CLI re-run)",
                c["warm_new_dataset_seconds"],
                c["speedup_new_dataset"],
            ],
        ],
    )
    ratio_verdict = common.verdict(t["ratio"], TARGET_RATIO)
    warm_verdict = common.verdict(min(c["speedup_same_dataset"], c["speedup_new_dataset"]), TARGET_WARM_SPEEDUP)
    return f"""Batch {result["batch_size"]}; both throughput sides run the same torch model ({result["space"]}).
Throughput over the first {t["documents"]} BBC articles ({t["chunks"]} windows, {t["content_tokens"]:,} content
tokens) in {len(t["block_ratios"])} interleaved blocks:

{throughput}

- **Ratio Prisma / plain: {t["ratio"]:.3f}x** (per block: {", ".join(f"{r:.3f}" for r in t["block_ratios"])}).
  Target >= {TARGET_RATIO}x: **{ratio_verdict}**. Both sides compute the same vectors: cosine of Prisma's document
  vectors to the mean of plain encode's window vectors {t["agreement_cosine_mean"]:.5f} mean,
  {t["agreement_cosine_min"]:.5f} min (plain encode re-tokenises the decoded window text, which can differ at the
  edges, e.g. a window that starts inside a word).
- **Truncation** (plain `encode` on whole documents, {tr["window"]}-token window) never sees
  **{tr["unseen_token_fraction"]:.1%} of the {tr["tokens"]:,} tokens** of all {tr["documents"]} BBC articles;
  {tr["truncated_document_fraction"]:.1%} of the articles lose text, one loses
  {tr["max_unseen_fraction_of_a_document"]:.0%} of it.
  On the timed articles it is {t["truncation_speedup"]:.2f}x faster in wall time than Prisma because it skips that
  text; on the ones it truncates, its vectors have cosine {t["long_document_cosine_mean"]:.3f} mean,
  {t["long_document_cosine_min"]:.3f} min to the whole-document vectors.
- **Cold vs warm** with the default settings ({result["default_space"]}) over {c["documents"]} articles
  ({c["cold_tokens_per_s"]:,.0f} tokens/s cold):

{cache}

  Target warm >= {TARGET_WARM_SPEEDUP:.0f}x faster than cold: **{warm_verdict}**."""


def main() -> None:
    common.main(__doc__, NAME, run, markdown)


if __name__ == "__main__":
    main()
