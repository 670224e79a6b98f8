"""Benchmark 2: embedding speed per content token, Prisma's paths against plain sentence-transformers (issue 48).

    .venv/bin/python -m bench.fast_cpu [--quick] [--docs 300]

The same BBC articles are embedded on each path, alternating, three times each after a warm-up: plain
sentence-transformers `encode` of the same windows (the baseline: torch fp32, the chunk vectors then averaged per
document, the same chunk-and-average work), Prisma's `embed_documents` on torch fp32 (the reference the cosines are
measured against), and Prisma on OpenVINO at fp32, at bf16 where the CPU has it natively and at int8 (NNCF). Reported:
content tokens/s per path, its ratio to plain sentence-transformers, the cosine of its document vectors to torch
fp32's, and the held-out FVU of an SAE trained (same settings and seed) on each set of vectors.

The target is for the path `auto` picks on this CPU: at least TARGET_X_PLAIN times plain sentence-transformers per
content token (1.5x on a CPU without bf16 or int8 matrix instructions, 3x on one with them: AVX-512 BF16 or VNNI,
AMX), every document vector at cosine >= TARGET_MIN_COSINE to fp32. To take an AVX2-only CPU's path on a newer one,
cap every library's instruction set: `ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 ATEN_CPU_CAPABILITY=avx2
PRISMA_CPU_FLAGS="avx2"` (BENCHMARKS.md section 2 says what this does and does not reproduce).
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
    cpu_has_int8_dot_product,
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
TITLE = "2. Embedding speed per token: Prisma's paths vs plain sentence-transformers"
TARGET_X_PLAIN = {"matrix": 3.0, "avx2": 1.5}
"""Content tokens/s of `auto`'s path over plain sentence-transformers': on CPUs with bf16 or int8 matrix instructions
("matrix"), and on the others ..."""
TARGET_MIN_COSINE = 0.99
"""... with every document vector at least this close (cosine) to its fp32 vector."""
LABELS = {
    "plain": "plain sentence-transformers `encode` of the same windows, averaged (the baseline)",
    "fp32": "Prisma, torch fp32 (the cosines' reference)",
    "openvino_fp32": "Prisma, OpenVINO fp32",
    "openvino_bf16": "Prisma, OpenVINO bf16",
    "openvino_int8": "Prisma, OpenVINO int8 (NNCF)",
}
QUICK_SAE_EPOCHS = 5
"""The quick run's SAEs train for at most this many epochs: it checks that each path's vectors give a held-out FVU,
not how good it is."""


def cpu_class() -> str:
    """ "matrix" where the CPU multiplies bf16 or int8 natively (AVX-512 BF16 or VNNI, AMX), else "avx2"."""
    return "matrix" if cpu_has_native_bf16() or cpu_has_int8_dot_product() else "avx2"


def auto_path() -> str:
    """The path `auto` embeds with on this CPU (before a dataset's own check, which may step back to bf16 or fp32)."""
    backend, precision = model_key(EmbedConfig()).split("|")[1].split("-")
    return "fp32" if backend == "torch" else f"openvino_{precision}"


def run(quick: bool = False, n_docs: int | None = None) -> dict[str, Any]:
    texts = common.speed_texts(quick) if n_docs is None else common.bbc_texts(n_docs)
    batch = common.EMBED_BATCH_SIZE
    configs = {"fp32": EmbedConfig(precision="fp32", backend="torch", batch_size=batch)}
    if openvino_installed():
        for precision in ("fp32", "bf16", "int8"):
            if precision != "bf16" or cpu_has_native_bf16():
                configs[f"openvino_{precision}"] = EmbedConfig(
                    precision=precision, backend="openvino", batch_size=batch
                )
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
        "batch_size": batch,
        "auto_space": model_key(EmbedConfig()),
        "auto_path": auto_path(),
        "cpu_class": cpu_class(),
        "native_bf16": cpu_has_native_bf16(),
        "paths": {name: _path_summary(name, seconds, tokens, vectors) for name in paths},
        "sae": _sae_fvu(vectors, quick),
    }


def _path_summary(
    name: str, seconds: dict[str, list[float]], tokens: int, vectors: dict[str, np.ndarray]
) -> dict[str, Any]:
    cosine = common.cosine_rows(vectors[name], vectors["fp32"])
    ratios = [plain / own for plain, own in zip(seconds["plain"], seconds[name], strict=True)]
    return {
        "seconds": seconds[name],
        "median_seconds": common.median(seconds[name]),
        "tokens_per_s": tokens / common.median(seconds[name]),
        "x_plain_per_round": ratios,
        "x_plain": common.median(ratios),
        "cosine_to_fp32_mean": float(cosine.mean()),
        "cosine_to_fp32_min": float(cosine.min()),
    }


def _sae_fvu(vectors: dict[str, np.ndarray], quick: bool) -> dict[str, float]:
    """Held-out FVU of an SAE trained with the same settings and seed on each path's vectors."""
    n_docs, dim = vectors["fp32"].shape
    config = suggest_config(n_docs, dim)
    if quick:
        config = replace(config, epochs=min(config.epochs, QUICK_SAE_EPOCHS))
    return {name: float(train_sae(data, config).metrics["fvu_holdout"]) for name, data in vectors.items()}


def _vectors(texts: list[str], config: EmbedConfig) -> np.ndarray:
    return embed_documents(texts, config).vectors


def _plain(encoder: Any, chunking: Chunking, n_docs: int, batch_size: int) -> np.ndarray:
    """Plain sentence-transformers `encode` of the windows as text (special tokens removed), averaged per document:
    what a user of sentence-transformers writes for the same chunk-and-average work, timed from the window texts."""
    windows = encoder.tokenizer.batch_decode(chunking.chunk_ids, skip_special_tokens=True)
    chunk_vectors = encoder.encode(windows, batch_size=batch_size)
    return average_by_document(np.asarray(chunk_vectors, dtype=np.float32), chunking.chunk_owner, n_docs)


def verdict(result: dict[str, Any]) -> tuple[float, bool]:
    """`auto`'s path: its median ratio to plain sentence-transformers, and whether it meets this CPU's target."""
    auto = result["paths"][result["auto_path"]]
    target = TARGET_X_PLAIN[result["cpu_class"]]
    return auto["x_plain"], auto["x_plain"] >= target and auto["cosine_to_fp32_min"] >= TARGET_MIN_COSINE


def markdown(result: dict[str, Any]) -> str:
    paths = result["paths"]
    rows = [
        [
            LABELS[name] + (" **(`auto` here)**" if name == result["auto_path"] else ""),
            summary["tokens_per_s"],
            summary["x_plain"],
            ", ".join(f"{ratio:.2f}" for ratio in summary["x_plain_per_round"]),
            summary["cosine_to_fp32_mean"],
            summary["cosine_to_fp32_min"],
            result["sae"][name],
        ]
        for name, summary in paths.items()
    ]
    header = ["path", "content tokens/s (median)", "x plain (median round)", "per round", "cosine to fp32, mean"]
    table = common.markdown_table([*header, "min", "SAE held-out FVU"], rows)
    ratio, met = verdict(result)
    auto = paths[result["auto_path"]]
    target = TARGET_X_PLAIN[result["cpu_class"]]
    kind = (
        "with bf16 or int8 matrix instructions"
        if result["cpu_class"] == "matrix"
        else "without bf16 or int8 matrix instructions"
    )
    size = f"{result['documents']} BBC articles ({result['content_tokens']:,} content tokens)"
    return f"""{size}, batch {result["batch_size"]}, median of {len(auto["seconds"])} interleaved rounds per path
after a warm-up. This CPU is one {kind}; `auto` embeds into **{result["auto_space"]}** here. Load average
{result["device"]["load_average_1m"]:.1f} at the start.

{table}

- **`auto` ({LABELS[result["auto_path"]]}): {ratio:.2f}x plain sentence-transformers per content token** (median of
  the per-round ratios), lowest cosine to fp32 {auto["cosine_to_fp32_min"]:.5f}; target >= {target}x at >=
  {TARGET_MIN_COSINE}: **{"met" if met else "missed"}**."""


def main() -> None:
    parser = common.parser(__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, help=f"BBC articles to embed (default {common.SPEED_DOCS})")
    args = parser.parse_args()
    common.publish(NAME, run(args.quick, args.docs), args, markdown)


if __name__ == "__main__":
    main()
