"""Benchmark 2: the fast CPU path (bf16 weights on CPUs with AMX / AVX-512 BF16) vs the torch fp32 default.

    .venv/bin/python -m bench.fast_cpu [--quick]

The same BBC articles are embedded with `embed_documents` at fp32 and at bf16, alternating, three times each:
content tokens/s, cosine of the bf16 document vectors to the fp32 ones, and the held-out FVU of an SAE trained
(same settings and seed) on each set of vectors. When the `openvino` package is importable, the same model
converted to OpenVINO and run at bf16 is measured too, as a candidate for an even faster path.
"""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from typing import Any

import numpy as np

from bench import common
from prisma_core.embed import (
    DEFAULT_MODEL,
    EmbedConfig,
    average_by_document,
    cpu_has_native_bf16,
    embed_documents,
    load_model,
    plan_chunks,
    resolve_device,
    resolve_precision,
)
from prisma_core.sae import suggest_config, train_sae

NAME = "fast_cpu"
TITLE = "2. Fast CPU path: bf16 vs fp32"
COMMAND = ".venv/bin/python -m bench.fast_cpu"
DOCS = 300
QUICK_DOCS = 24
BATCH_SIZE = 64
REPEATS = 3
TARGET_SPEEDUP = 2.5
TARGET_MIN_COSINE = 0.99


def run(quick: bool = False) -> dict[str, Any]:
    texts = common.bbc_texts(QUICK_DOCS if quick else DOCS)
    fp32 = EmbedConfig(precision="fp32", batch_size=BATCH_SIZE)
    bf16 = EmbedConfig(precision="bf16", batch_size=BATCH_SIZE)
    encoder = load_model(DEFAULT_MODEL, "auto", "fp32")
    tokens = int(plan_chunks(encoder, texts).tokens_per_doc.sum())
    paths = {"fp32": lambda: embed_documents(texts, fp32).vectors, "bf16": lambda: embed_documents(texts, bf16).vectors}
    openvino = _openvino_path(texts) if not quick and importlib.util.find_spec("openvino") else None
    if openvino is not None:
        paths["openvino_bf16"] = openvino
    for function in paths.values():  # warm-up: kernel selection and first-call costs
        function()
    seconds: dict[str, list[float]] = {name: [] for name in paths}
    vectors: dict[str, np.ndarray] = {}
    names = list(paths)
    for repeat in range(1 if quick else REPEATS):
        for name in names[repeat % len(names) :] + names[: repeat % len(names)]:
            elapsed, vectors[name] = common.timed(paths[name])
            seconds[name].append(elapsed)
    device = resolve_device("auto")
    return {
        "device": common.device_report(),
        "quick": quick,
        "documents": len(texts),
        "content_tokens": tokens,
        "batch_size": BATCH_SIZE,
        "auto_precision": resolve_precision("auto", device),
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


def _openvino_path(texts: list[str]) -> Any:
    """Candidate: the fp32 model converted to OpenVINO, compiled with a bf16 inference hint, fed the same windows."""
    import openvino
    import torch

    encoder = load_model(DEFAULT_MODEL, "cpu", "fp32")

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return self.encoder({"input_ids": input_ids, "attention_mask": attention_mask})["sentence_embedding"]

    example = encoder.tokenizer(["an example"], return_tensors="pt")
    shape = openvino.PartialShape([-1, -1])
    model = openvino.convert_model(
        Pooled().eval(),
        example_input={"input_ids": example["input_ids"], "attention_mask": example["attention_mask"]},
        input=[("input_ids", shape, openvino.Type.i64), ("attention_mask", shape, openvino.Type.i64)],
    )
    compiled = openvino.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "bf16"})
    request = compiled.create_infer_request()

    def embed() -> np.ndarray:
        chunking = plan_chunks(encoder, texts)
        ids = chunking.chunk_ids
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        out = np.empty((len(ids), encoder.get_embedding_dimension()), dtype=np.float32)
        for start in range(0, len(order), BATCH_SIZE):
            batch = order[start : start + BATCH_SIZE]
            padded = encoder.tokenizer.pad({"input_ids": [ids[i] for i in batch]}, padding=True, return_tensors="np")
            inputs = {name: padded[name].astype(np.int64) for name in ("input_ids", "attention_mask")}
            out[batch] = request.infer(inputs)[0]
        return average_by_document(out, chunking.chunk_owner, len(texts))

    return embed


def markdown(result: dict[str, Any]) -> str:
    paths = result["paths"]
    fp32 = paths["fp32"]["tokens_per_s"]
    labels = {
        "fp32": "torch fp32 (default elsewhere)",
        "bf16": "torch, bf16 weights (Prisma's auto choice here)",
        "openvino_bf16": "OpenVINO, bf16 inference hint (candidate, not in Prisma)",
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
    bf16 = paths["bf16"]
    speedup = bf16["tokens_per_s"] / fp32
    met = speedup >= TARGET_SPEEDUP and bf16["cosine_to_fp32_min"] >= TARGET_MIN_COSINE
    auto = result["auto_precision"]
    size = f"{result['documents']} BBC articles ({result['content_tokens']:,} content tokens)"
    return f"""{size}, batch {result["batch_size"]},
median of {len(bf16["seconds"])} interleaved runs per path. Native bf16 on this CPU: {result["native_bf16"]};
`precision="auto"` selects **{auto}** here, and fp32 on CPUs without AMX / AVX-512 BF16 (never slower there).

{table}

- **bf16 speed-up {speedup:.2f}x at minimum cosine {bf16["cosine_to_fp32_min"]:.5f}**; target >= {TARGET_SPEEDUP}x at
  >= {TARGET_MIN_COSINE}: **{"met" if met else "missed"}**."""


def main() -> None:
    args = common.parser(__doc__.splitlines()[0]).parse_args()
    result = run(args.quick)
    common.publish(NAME, result, args, markdown)


if __name__ == "__main__":
    main()
