"""Benchmark 2: the fast CPU paths (bf16 on CPUs with AMX / AVX-512 BF16) vs the torch fp32 default.

    .venv/bin/python -m bench.fast_cpu [--quick]

The same BBC articles are embedded with `embed_documents` on three paths, alternating, three times each: torch
fp32 (the reference), torch with bf16 weights, and the OpenVINO backend at bf16 (what `backend="auto"` picks on
such CPUs): content tokens/s, cosine of each path's document vectors to the fp32 ones, and the held-out FVU of an
SAE trained (same settings and seed) on each set of vectors. Each path is warmed up first (model conversion and
kernel selection are paid once per process, not per run).
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

import numpy as np

from bench import common
from prisma_core.embed import (
    DEFAULT_MODEL,
    EmbedConfig,
    cpu_has_native_bf16,
    embed_documents,
    load_model,
    model_key,
    openvino_installed,
    plan_chunks,
)
from prisma_core.sae import suggest_config, train_sae

NAME = "fast_cpu"
TITLE = "2. Fast CPU path: bf16 vs fp32"
TARGET_SPEEDUP = 2.5
"""The fastest path should embed at least this many times faster than torch fp32, ..."""
TARGET_MIN_COSINE = 0.99
"""... with every document vector at least this close (cosine) to its fp32 vector."""


def run(quick: bool = False) -> dict[str, Any]:
    texts = common.speed_texts(quick)
    configs = {
        "fp32": EmbedConfig(precision="fp32", batch_size=common.EMBED_BATCH_SIZE),
        "bf16": EmbedConfig(precision="bf16", backend="torch", batch_size=common.EMBED_BATCH_SIZE),
    }
    if openvino_installed():
        configs["openvino_bf16"] = EmbedConfig(precision="bf16", backend="openvino", batch_size=common.EMBED_BATCH_SIZE)
    encoder = load_model(DEFAULT_MODEL, "auto", "fp32")
    tokens = int(plan_chunks(encoder, texts).tokens_per_doc.sum())
    paths = {name: functools.partial(_vectors, texts, config) for name, config in configs.items()}
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


def markdown(result: dict[str, Any]) -> str:
    paths = result["paths"]
    fp32 = paths["fp32"]["tokens_per_s"]
    labels = {
        "fp32": "torch fp32 (the reference; the default on CPUs without native bf16)",
        "bf16": "torch, bf16 weights",
        "openvino_bf16": "OpenVINO backend, bf16",
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
    fastest = max((name for name in paths if name != "fp32"), key=lambda name: paths[name]["tokens_per_s"])
    best = paths[fastest]
    speedup = best["tokens_per_s"] / fp32
    met = speedup >= TARGET_SPEEDUP and best["cosine_to_fp32_min"] >= TARGET_MIN_COSINE
    size = f"{result['documents']} BBC articles ({result['content_tokens']:,} content tokens)"
    return f"""{size}, batch {result["batch_size"]},
median of {len(best["seconds"])} interleaved runs per path after a warm-up. Native bf16 on this CPU:
{result["native_bf16"]}; the default settings embed into the vector space **{result["auto_space"]}** here
(OpenVINO at bf16 where the CPU has native bf16 and openvino is installed, else torch fp32: never slower than fp32).

{table}

- **Fastest path, {labels[fastest]}: {speedup:.2f}x torch fp32 at minimum cosine {best["cosine_to_fp32_min"]:.5f}**;
  target >= {TARGET_SPEEDUP}x at >= {TARGET_MIN_COSINE}: **{"met" if met else "missed"}**."""


def main() -> None:
    common.main(__doc__, NAME, run, markdown)


if __name__ == "__main__":
    main()
