"""Benchmark 2: the fast CPU paths (bf16 on CPUs with AMX / AVX-512 BF16, OpenVINO fp32 and int8 elsewhere) vs torch
fp32 and plain sentence-transformers.

    .venv/bin/python -m bench.fast_cpu [--quick] [--docs 300]

The same BBC articles are embedded on several paths, alternating, three times each: torch fp32 through
`embed_documents` (the reference), plain sentence-transformers `encode` of the same windows (the chunk vectors then
averaged per document: the same chunk-and-average work), and, on CPUs with native bf16, torch with bf16 weights and
the OpenVINO backend at bf16 (what `backend="auto"` picks there); on CPUs without it (AVX2), the OpenVINO backend at
fp32 (what `auto` picks there for the bundled model) and at int8 (what `auto` picks only where int8 measured faster
than fp32, embed/quantize.py): content tokens/s, cosine of each path's document vectors to the fp32 ones, and the
held-out FVU of an SAE trained (same settings and seed) on each set of vectors. Each path is warmed up first (model
conversion and kernel selection are paid once per process, not per run).
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

import numpy as np

from bench import common
from prisma_core.embed import (
    DEFAULT_MODEL,
    Chunking,
    EmbedConfig,
    average_by_document,
    cpu_has_native_bf16,
    embed_documents,
    load_model,
    model_key,
    openvino_installed,
    plan_chunks,
)
from prisma_core.sae import suggest_config
from prisma_core.sae.train import train_sae

NAME = "fast_cpu"
TITLE = "2. Fast CPU path: bf16 vs fp32"
TARGET_SPEEDUP = 2.5
"""The fastest path should embed at least this many times faster than torch fp32, ..."""
TARGET_MIN_COSINE = 0.99
"""... with every document vector at least this close (cosine) to its fp32 vector."""


def run(quick: bool = False, n_docs: int | None = None) -> dict[str, Any]:
    texts = common.speed_texts(quick) if n_docs is None else common.bbc_texts(n_docs)
    batch = common.EMBED_BATCH_SIZE
    configs = {"fp32": EmbedConfig(precision="fp32", backend="torch", batch_size=batch)}
    native = cpu_has_native_bf16()
    if native:
        configs["bf16"] = EmbedConfig(precision="bf16", backend="torch", batch_size=batch)
    for precision in ("bf16",) if native else ("fp32", "int8"):
        if openvino_installed():
            configs[f"openvino_{precision}"] = EmbedConfig(precision=precision, backend="openvino", batch_size=batch)
    encoder = load_model(DEFAULT_MODEL, "auto", "fp32")
    chunking = plan_chunks(encoder, texts)
    tokens = int(chunking.tokens_per_doc.sum())
    paths = {name: functools.partial(_vectors, texts, config) for name, config in configs.items()}
    paths["plain"] = functools.partial(_plain, encoder, chunking, len(texts), batch)
    seconds, vectors = common.interleaved(paths, common.timed_rounds(quick))
    return {
        "device": common.device_report(),
        "quick": quick,
        "documents": len(texts),
        "content_tokens": tokens,
        "batch_size": common.EMBED_BATCH_SIZE,
        "auto_space": model_key(EmbedConfig()),
        "native_bf16": cpu_has_native_bf16(),
        "paths": {name: _path_summary(name, seconds[name], tokens, vectors) for name in paths},
        "sae": _sae_fvu(vectors, quick),
    }


def _path_summary(name: str, seconds: list[float], tokens: int, vectors: dict[str, np.ndarray]) -> dict[str, Any]:
    cosine = common.cosine_rows(vectors[name], vectors["fp32"])
    return {
        "seconds": seconds,
        "median_seconds": common.median(seconds),
        "tokens_per_s": tokens / common.median(seconds),
        "cosine_to_fp32_mean": float(cosine.mean()),
        "cosine_to_fp32_min": float(cosine.min()),
    }


def _sae_fvu(vectors: dict[str, np.ndarray], quick: bool) -> dict[str, float]:
    """Held-out FVU of an SAE trained with the same settings and seed on each path's vectors."""
    n_docs, dim = vectors["fp32"].shape
    config = suggest_config(n_docs, dim)
    if quick:
        config = replace(config, epochs=min(config.epochs, 20))
    return {name: float(train_sae(data, config).metrics["fvu_holdout"]) for name, data in vectors.items()}


def _vectors(texts: list[str], config: EmbedConfig) -> np.ndarray:
    return embed_documents(texts, config).vectors


def _plain(encoder: Any, chunking: Chunking, n_docs: int, batch_size: int) -> np.ndarray:
    """Plain sentence-transformers `encode` of the windows as text (special tokens removed), averaged per document:
    what a user of sentence-transformers writes for the same chunk-and-average work, timed from the window texts."""
    windows = encoder.tokenizer.batch_decode(chunking.chunk_ids, skip_special_tokens=True)
    chunk_vectors = encoder.encode(windows, batch_size=batch_size)
    return average_by_document(np.asarray(chunk_vectors, dtype=np.float32), chunking.chunk_owner, n_docs)


def markdown(result: dict[str, Any]) -> str:
    paths = result["paths"]
    fp32 = paths["fp32"]["tokens_per_s"]
    labels = {
        "fp32": "torch fp32, Prisma's chunk-and-average (the reference)",
        "plain": "plain sentence-transformers `encode` of the same windows, averaged",
        "bf16": "torch, bf16 weights",
        "openvino_bf16": "OpenVINO backend, bf16",
        "openvino_fp32": "OpenVINO backend, fp32",
        "openvino_int8": "OpenVINO backend, int8 (NNCF)",
    }
    rows = [
        [
            labels[name],
            summary["tokens_per_s"],
            summary["tokens_per_s"] / fp32,
            summary["cosine_to_fp32_mean"],
            summary["cosine_to_fp32_min"],
            result["sae"][name],
        ]
        for name, summary in paths.items()
    ]
    table = common.markdown_table(
        ["path", "content tokens/s (median)", "x fp32", "cosine to fp32, mean", "min", "SAE held-out FVU"], rows
    )
    fastest = max(
        (name for name in paths if name not in ("fp32", "plain")), key=lambda name: paths[name]["tokens_per_s"]
    )
    auto = result["auto_space"].split("|")[1].replace("-", "_")
    auto = auto if auto in paths else "fp32"
    best = paths[fastest]
    speedup = best["tokens_per_s"] / fp32
    met = speedup >= TARGET_SPEEDUP and best["cosine_to_fp32_min"] >= TARGET_MIN_COSINE
    size = f"{result['documents']} BBC articles ({result['content_tokens']:,} content tokens)"
    return f"""{size}, batch {result["batch_size"]},
median of {len(best["seconds"])} interleaved runs per path after a warm-up. Native bf16 on this CPU:
{result["native_bf16"]}; the default settings embed into the vector space **{result["auto_space"]}** here
(OpenVINO at bf16 where the CPU has native bf16 and openvino is installed; else OpenVINO fp32 for the bundled model,
int8 where it measured faster than fp32). Load average {result["device"]["load_average_1m"]:.1f} at the start.

{table}

- **`auto` ({labels[auto]}): {paths[auto]["tokens_per_s"] / paths["plain"]["tokens_per_s"]:.2f}x plain
  sentence-transformers** and {paths[auto]["tokens_per_s"] / fp32:.2f}x torch fp32 (medians, same run).
- **Fastest path, {labels[fastest]}: {speedup:.2f}x torch fp32 at minimum cosine {best["cosine_to_fp32_min"]:.5f}**;
  target >= {TARGET_SPEEDUP}x at >= {TARGET_MIN_COSINE}: **{"met" if met else "missed"}**."""


def main() -> None:
    parser = common.parser(__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, help=f"BBC articles to embed (default {common.SPEED_DOCS})")
    args = parser.parse_args()
    common.publish(NAME, run(args.quick, args.docs), args, markdown)


if __name__ == "__main__":
    main()
