"""9. GPU: embedding and SAE training on CUDA (bf16) against the CPU, same data, same settings, side by side.

Where no CUDA device exists the benchmark says so and measures nothing: its numbers need a GPU machine.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bench import common
from prisma_core.embed import EmbedConfig, embed_documents
from prisma_core.sae import suggest_config
from prisma_core.sae.train import train_sae

NAME = "gpu"
TITLE = "10. GPU: CUDA bf16 vs CPU for embedding and SAE training"
DOCS = 600
QUICK_DOCS = 24
TARGET_MIN_COSINE = 0.99
"""Every document vector on the GPU at least this close (cosine) to its CPU fp32 vector."""
TARGET_FVU_GAP = 0.01
"""The SAE trained on the GPU within this held-out FVU of the one trained on the CPU."""


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def run(quick: bool = False) -> dict[str, Any]:
    if not cuda_available():
        return {"device": common.device_report(), "quick": quick, "skipped": "no GPU"}
    texts = common.bbc_texts(QUICK_DOCS if quick else DOCS)
    sides = {"cpu": EmbedConfig(device="cpu", precision="fp32", backend="torch"), "cuda": EmbedConfig(device="cuda")}
    embed_seconds, vectors = {}, {}
    for name, config in sides.items():
        embed_documents(texts[:8], config)  # warm-up: model load, kernel selection
        embed_seconds[name], vectors[name] = common.timed(lambda config=config: embed_documents(texts, config).vectors)
    cosine = common.cosine_rows(vectors["cuda"], vectors["cpu"])
    config = suggest_config(len(texts), vectors["cpu"].shape[1])
    trained = {device: train_sae(vectors["cpu"], replace(config, device=device)) for device in ("cpu", "cuda")}
    return {
        "device": common.device_report(),
        "quick": quick,
        "documents": len(texts),
        "embedding_seconds": embed_seconds,
        "embedding_speedup": embed_seconds["cpu"] / embed_seconds["cuda"],
        "cosine_to_cpu_mean": float(cosine.mean()),
        "cosine_to_cpu_min": float(cosine.min()),
        "training_seconds": {device: result.metrics["seconds"] for device, result in trained.items()},
        "training_speedup": trained["cpu"].metrics["seconds"] / trained["cuda"].metrics["seconds"],
        "fvu_holdout": {device: result.metrics["fvu_holdout"] for device, result in trained.items()},
    }


def markdown(result: dict[str, Any]) -> str:
    if "skipped" in result:
        return f"**skipped: {result['skipped']}** (torch sees no CUDA device on this machine; run it where one exists)."
    fvu_gap = abs(result["fvu_holdout"]["cuda"] - result["fvu_holdout"]["cpu"])
    met = result["cosine_to_cpu_min"] >= TARGET_MIN_COSINE and fvu_gap <= TARGET_FVU_GAP
    table = common.markdown_table(
        ["stage", "CPU seconds", "GPU seconds", "GPU speed-up", "agreement"],
        [
            [
                f"embedding {result['documents']} BBC articles",
                result["embedding_seconds"]["cpu"],
                result["embedding_seconds"]["cuda"],
                result["embedding_speedup"],
                f"cosine mean {result['cosine_to_cpu_mean']:.5f}, min {result['cosine_to_cpu_min']:.5f}",
            ],
            [
                "SAE training (suggested settings)",
                result["training_seconds"]["cpu"],
                result["training_seconds"]["cuda"],
                result["training_speedup"],
                f"held-out FVU {result['fvu_holdout']['cpu']:.4f} (CPU) vs {result['fvu_holdout']['cuda']:.4f} (GPU)",
            ],
        ],
    )
    return f"""{table}

- Same vectors and features to tolerance (cosine >= {TARGET_MIN_COSINE}, FVU within {TARGET_FVU_GAP}):
  **{"met" if met else "missed"}**."""


def main() -> None:
    common.main(__doc__, NAME, run, markdown)


if __name__ == "__main__":
    main()
