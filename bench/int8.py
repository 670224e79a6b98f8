"""Benchmark 9: int8 embedding (NNCF post-training quantization) vs bf16 and fp32, all on the OpenVINO backend.

    .venv/bin/python -m bench.int8 [--quick]              # speed and agreement on BBC
    .venv/bin/python -m bench.int8 --quality [--quick]    # bench.quality's best-F1 with auto at int8 vs bf16

- Speed: the same BBC articles embedded by chunk-and-average (tokenising, windows, averaging) through the OpenVINO
  model compiled at int8, bf16 and fp32 (the default batch size), in interleaved rounds with the order rotating;
  content tokens/s of each path's median round, and the int8 / bf16 ratio per round and of the medians. Each model
  is loaded and compiled once and warmed up first (quantization, conversion and compilation are paid once per
  machine or process, not per round); the int8 model's first-use accuracy check (embed/quantize.py) is reported as
  stored.
- Agreement: cosine of the int8 and bf16 document vectors to the fp32 ones (mean, 1st percentile, min).
- Quality (--quality): `bench.quality` on all three corpora (--quick: 400 documents each; no BERTopic) twice in one
  run, with `auto` at int8 and with `auto` sent back to bf16 by check thresholds no model can pass (the fallback
  path itself): mean best-F1 per level and its change.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from bench import common, quality
from prisma_core.embed import EmbedConfig, int8_choice, model_key, openvino_backend, plan_chunks, quantize

NAME = "int8"
TITLE = "9. int8 embedding: int8 vs bf16 vs fp32"
ROUNDS = 4
"""Timed passes of each path (the median counts): one more than the other speed comparisons, int8's margin over
bf16 being the narrowest measured."""
PRECISIONS = ("int8", "bf16", "fp32")
TARGET_RATIO = 1.6
"""int8 should embed at least this many times faster than bf16, ..."""
TARGET_F1_CHANGE = 0.01
"""... and move the quality benchmark's mean best-F1 by at most this much."""
QUALITY_LEVELS = ("theme", "family", "feature", "k-means K", "probe (ceiling)")


def run(quick: bool = False) -> dict[str, Any]:
    texts = common.speed_texts(quick)
    configs = {name: EmbedConfig(precision=name, backend="openvino") for name in PRECISIONS}
    loaded = {name: openvino_backend.load_encoder(config) for name, config in configs.items()}  # each compiled once
    paths = {name: functools.partial(quantize.document_vectors, *pair, texts) for name, pair in loaded.items()}
    tokens = int(plan_chunks(loaded["fp32"][0], texts).tokens_per_doc.sum())
    seconds, vectors = common.interleaved(paths, common.timed_rounds(quick, ROUNDS))
    check = int8_choice.int8_check(configs["int8"].model)
    return {
        "device": common.device_report(),
        "quick": quick,
        "documents": len(texts),
        "content_tokens": tokens,
        "batch_size": configs["int8"].batch_size,
        "auto_space": model_key(EmbedConfig()),
        "quantized_in_this_run": openvino_backend.conversions,
        "check": asdict(check) if check else None,
        "round_ratios": [bf16 / int8 for bf16, int8 in zip(seconds["bf16"], seconds["int8"], strict=True)],
        "paths": {name: _path_summary(seconds[name], tokens, vectors[name], vectors["fp32"]) for name in paths},
    }


def _path_summary(seconds: list[float], tokens: int, vectors: np.ndarray, reference: np.ndarray) -> dict[str, Any]:
    cosine = common.cosine_rows(vectors, reference)
    return {
        "seconds": seconds,
        "tokens_per_s": tokens / common.median(seconds),
        "cosine_to_fp32_mean": float(cosine.mean()),
        "cosine_to_fp32_p1": float(np.percentile(cosine, 1)),
        "cosine_to_fp32_min": float(cosine.min()),
    }


@contextlib.contextmanager
def _auto_at_bf16() -> Iterator[None]:
    """`auto` falls back from int8 as it does when the accuracy check fails: thresholds above any cosine."""
    kept = int8_choice.MIN_MEAN_COSINE
    int8_choice.MIN_MEAN_COSINE = 2.0
    try:
        yield
    finally:
        int8_choice.MIN_MEAN_COSINE = kept


def run_quality(cache: Path, quick: bool) -> dict[str, Any]:
    """bench.quality on all corpora with auto at int8, then at bf16, each in its own workspace."""
    sides = {}
    for side, setting in (("int8", contextlib.nullcontext()), ("bf16", _auto_at_bf16())):
        with setting:
            space = model_key(EmbedConfig())
            result = quality.run(list(quality.CORPORA), cache / f"int8_quality_{side}", quick, bertopic=False)
        sides[side] = {"space": space, "corpora": result["corpora"]}
    return {"device": common.device_report(), "quick": quick, "sides": sides, "changes": _f1_changes(sides)}


def _f1_changes(sides: dict[str, Any]) -> dict[str, dict[str, float]]:
    """corpus -> level -> mean best-F1 at int8 minus at bf16."""
    int8, bf16 = sides["int8"]["corpora"], sides["bf16"]["corpora"]
    return {
        corpus: {
            level: int8[corpus]["levels"][level]["best_f1"] - bf16[corpus]["levels"][level]["best_f1"]
            for level in QUALITY_LEVELS
        }
        for corpus in int8
    }


def markdown(result: dict[str, Any]) -> str:
    paths = result["paths"]
    labels = {"int8": "int8 (NNCF, calibrated on bundled sentences)", "bf16": "bf16", "fp32": "fp32 (the reference)"}
    rows = [
        [
            labels[name],
            summary["tokens_per_s"],
            summary["tokens_per_s"] / paths["bf16"]["tokens_per_s"],
            summary["cosine_to_fp32_mean"],
            summary["cosine_to_fp32_p1"],
            summary["cosine_to_fp32_min"],
        ]
        for name, summary in paths.items()
    ]
    table = common.markdown_table(
        ["OpenVINO path", "content tokens/s (median)", "x bf16", "cosine to fp32, mean", "1st percentile", "min"], rows
    )
    ratio = paths["int8"]["tokens_per_s"] / paths["bf16"]["tokens_per_s"]
    check = result["check"] or {}
    return f"""{result["documents"]} BBC articles ({result["content_tokens"]:,} content tokens), batch
{result["batch_size"]}, median of {len(paths["int8"]["seconds"])} interleaved rounds per path after a warm-up. The
default settings embed into **{result["auto_space"]}** here.

{table}

- **int8 / bf16: {ratio:.2f}x** (per round: {", ".join(f"{r:.2f}" for r in result["round_ratios"])}); target
  >= {TARGET_RATIO}x: **{common.verdict(ratio, TARGET_RATIO)}**.
- First-use check stored with the int8 model (bundled check texts, {check.get("documents", "-")} documents): cosine to
  fp32 {check.get("mean_cosine", float("nan")):.4f} mean, {check.get("min_cosine", float("nan")):.4f} min (auto
  needs >= {int8_choice.MIN_MEAN_COSINE} and >= {int8_choice.MIN_COSINE})."""


def quality_markdown(result: dict[str, Any]) -> str:
    changes = result["changes"]
    sides = result["sides"]
    rows = [
        [
            corpus,
            level,
            sides["bf16"]["corpora"][corpus]["levels"][level]["best_f1"],
            sides["int8"]["corpora"][corpus]["levels"][level]["best_f1"],
            change,
        ]
        for corpus, levels in changes.items()
        for level, change in levels.items()
    ]
    table = common.markdown_table(["corpus", "level", "mean best-F1 at bf16", "at int8", "change"], rows)
    prisma = [levels[level] for levels in changes.values() for level in ("theme", "family", "feature")]
    mean_change = float(np.mean(prisma))
    largest = float(np.max(np.abs(prisma)))
    return f"""`bench.quality` ({"400 documents per corpus" if result["quick"] else "whole corpora"}, no BERTopic)
with auto at int8 ({sides["int8"]["space"]}) and sent back to bf16 ({sides["bf16"]["space"]}):

{table}

- Mean change of Prisma's best-F1 (themes, families, features, all corpora): **{mean_change:+.4f}**, largest
  {largest:.4f}; target |change| <= {TARGET_F1_CHANGE}: **{common.verdict(-abs(mean_change), -TARGET_F1_CHANGE)}**."""


def main() -> None:
    arguments = common.parser(__doc__.splitlines()[0])
    arguments.add_argument("--quality", action="store_true", help="the quality benchmark at int8 vs bf16 instead")
    args = arguments.parse_args()
    if args.quality:
        common.publish(f"{NAME}_quality", run_quality(args.cache, args.quick), args, quality_markdown)
    else:
        common.publish(NAME, run(args.quick), args, markdown)


if __name__ == "__main__":
    main()
