"""Benchmark 19: embedding with passages against without, side by side in one process.

    .venv/bin/python -m bench.passages [--quick]

- Throughput: `embed_documents(texts, config)` and `embed_documents(texts, config, passages=True)` (the same forward
  passes, plus the tokens' character offsets, the cuts at sentence ends and the passages pooled from the token states
  in numpy) take turns over blocks of BBC articles, rotating who goes first, with the default settings (the vector
  space `auto` picks on this machine) and with torch fp32. Ratio = seconds without / seconds with (>= 0.95: within
  5%). The document vectors of both sides must be identical.
- What passages there are: per article and their tokens, and the share that end at a sentence end or a line break.
- Storage: the LanceDB table of the timed articles' passages (float16 vectors), bytes per passage on disk.
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from bench import common
from prisma_core.embed import EmbedConfig, embed_documents, model_key
from prisma_core.embed.passages import CLOSERS, SENTENCE_ENDS
from prisma_core.store import Passages, Workspace
from prisma_core.store.datasets import text_hash
from prisma_core.store.passages import passages_table_name

NAME = "passages"
TITLE = "19. Passages: embedding with and without them, side by side"
TARGET_RATIO = 0.95
"""Embedding with passages should keep at least this share of the throughput without."""
FULL_BLOCKS = 6


def run(quick: bool = False) -> dict[str, Any]:
    texts = common.speed_texts(quick)
    configs = {"default": EmbedConfig(), "torch fp32": EmbedConfig(backend="torch", precision="fp32")}
    results = {name: _side_by_side(texts, config, 1 if quick else FULL_BLOCKS) for name, config in configs.items()}
    passages = embed_documents(texts, configs["default"], passages=True).passages
    return {
        "device": common.device_report(),
        "quick": quick,
        "documents": len(texts),
        "spaces": {name: model_key(config) for name, config in configs.items()},
        "throughput": results,
        "passages": _described(texts, passages),
        "storage": _stored(texts, passages, model_key(configs["default"])),
    }


def _side_by_side(texts: list[str], config: EmbedConfig, blocks: int) -> dict[str, Any]:
    """Both sides over each block of documents (after one untimed warm-up of each), the first side rotating."""
    embed_documents(texts[:4], config, passages=True)
    embed_documents(texts[:4], config)
    bounds = np.linspace(0, len(texts), blocks + 1).astype(int)
    seconds = {"without": 0.0, "with": 0.0}
    block_ratios, identical, tokens = [], True, 0
    for number, (start, stop) in enumerate(itertools.pairwise(bounds)):
        runs = {
            "without": lambda start=start, stop=stop: embed_documents(texts[start:stop], config),
            "with": lambda start=start, stop=stop: embed_documents(texts[start:stop], config, passages=True),
        }
        block, embedded = {}, {}
        for name in common.rotated(list(runs), number):
            block[name], embedded[name] = common.timed(runs[name])
            seconds[name] += block[name]
        block_ratios.append(block["without"] / block["with"])
        identical &= bool(np.array_equal(embedded["without"].vectors, embedded["with"].vectors))
        tokens += int(embedded["with"].chunking.tokens_per_doc.sum())
    return {
        "blocks": blocks,
        "content_tokens": tokens,
        "seconds_without": seconds["without"],
        "seconds_with": seconds["with"],
        "tokens_per_s_without": tokens / seconds["without"],
        "tokens_per_s_with": tokens / seconds["with"],
        "ratio": seconds["without"] / seconds["with"],
        "block_ratios": block_ratios,
        "median_block_ratio": common.median(block_ratios),
        "document_vectors_identical": identical,
    }


def _described(texts: list[str], passages: Passages) -> dict[str, Any]:
    ending = [
        _ends_a_sentence_or_line(texts[position], int(end))
        for position, end in zip(passages.position, passages.end, strict=True)
    ]
    return {
        "passages": len(passages),
        "per_document_mean": len(passages) / len(texts),
        "tokens_mean": float(passages.n_tokens.mean()),
        "tokens_median": float(np.median(passages.n_tokens)),
        "tokens_max": int(passages.n_tokens.max()),
        "ending_at_sentence_or_line": float(np.mean(ending)),
    }


def _ends_a_sentence_or_line(text: str, end: int) -> bool:
    return (end > 0 and text[end - 1] in SENTENCE_ENDS + CLOSERS) or "\n" in text[end : end + 3]


def _stored(texts: list[str], passages: Passages, key: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="prisma-bench-") as folder:
        workspace = Workspace(Path(folder) / "workspace")
        workspace.passages.save(key, [text_hash(text) for text in texts], passages)
        table = Path(folder) / "workspace" / "lancedb" / f"{passages_table_name(key)}.lance"
        size = sum(file.stat().st_size for file in table.rglob("*") if file.is_file())
    return {"passages": len(passages), "bytes": size, "bytes_per_passage": size / len(passages)}


def markdown(result: dict[str, Any]) -> str:
    rows = [
        [
            f"{name} (`{result['spaces'][name].replace('|', ' ')}`)",
            t["seconds_without"],
            t["seconds_with"],
            t["tokens_per_s_without"],
            t["tokens_per_s_with"],
            t["ratio"],
            "yes" if t["document_vectors_identical"] else "**no**",
        ]
        for name, t in result["throughput"].items()
    ]
    table = common.markdown_table(
        ["settings", "s without", "s with", "tokens/s without", "tokens/s with", "ratio", "same document vectors"],
        rows,
    )
    worst = min(t["ratio"] for t in result["throughput"].values())
    blocks = "; ".join(
        f"{name}: {', '.join(f'{r:.3f}' for r in t['block_ratios'])}" for name, t in result["throughput"].items()
    )
    p, s = result["passages"], result["storage"]
    return f"""{result["documents"]} BBC articles, timed in interleaved blocks (the side going first rotating):

{table}

- **Ratio without / with passages: {worst:.3f}x at worst** (per block: {blocks}).
  Target >= {TARGET_RATIO}x (within 5%): **{common.verdict(worst, TARGET_RATIO)}**.
- Passages: {p["passages"]:,} ({p["per_document_mean"]:.1f} per article), {p["tokens_mean"]:.0f} tokens on average
  (median {p["tokens_median"]:.0f}, longest {p["tokens_max"]}); {p["ending_at_sentence_or_line"]:.0%} end at a sentence
  end or a line break (the others at a window's end, or cut by 96 tokens without one).
- Stored: {s["bytes"] / 1e6:.1f} MB for {s["passages"]:,} passages, {s["bytes_per_passage"]:.0f} bytes each (a float16
  vector of 384 dimensions is 768 bytes)."""


def main() -> None:
    common.main(__doc__, NAME, run, markdown)


if __name__ == "__main__":
    main()
