"""Benchmark 5: LanceDB vector search through the store, with and without an index, vs exact numpy search.

    .venv/bin/python -m bench.search [--quick]

200,000 x 384 vectors (mixtures of real BBC vectors plus noise, so no two coincide) are saved with
`Workspace.save_vectors`; queries are held-out BBC articles' vectors. `Workspace.search_documents` is timed per query
(p50 / p95) and its top 10 compared with exact cosine search in numpy (recall@10): first on the flat table, then
after the store's own `_maybe_index` builds its IVF-PQ index. Index settings (nprobes, refine factor) the store does
not use yet are measured on the same index as candidates.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench import common
from prisma_core.store import Workspace, vectors_table_name
from prisma_core.store import vectors as store

NAME = "search"
TITLE = "5. Search: LanceDB latency and recall@10"
ROWS = 200_000
QUICK_ROWS = 2_000
QUERIES = 100
QUICK_QUERIES = 10
LIMIT = 10
KEY = "bench|fp32"
CANDIDATES = [(20, None), (20, 10), (50, 10), (100, 20)]
"""(nprobes, refine_factor) settings measured on the index; (20, None) is LanceDB's default."""


def run(quick: bool = False, cache_dir: Path = common.RESULTS_DIR / "cache") -> dict[str, Any]:
    vectors = common.bbc_vectors(40 if quick else None, cache_dir)
    if quick:
        base, queries = vectors, common.resample(vectors, QUICK_QUERIES, seed=7)
    else:
        train_rows, holdout_rows = common.split_rows(len(vectors))
        base, queries = vectors[train_rows], vectors[holdout_rows][:QUERIES]
    data = common.resample(base, QUICK_ROWS if quick else ROWS, seed=6)
    exact = _exact_search(data, queries)
    with tempfile.TemporaryDirectory(prefix="prisma-bench-search-") as folder:
        workspace, dataset_id = _workspace(Path(folder), len(data))
        threshold = store.INDEX_MIN_ROWS
        store.INDEX_MIN_ROWS = len(data) + 1  # save without an index first
        try:
            save_seconds, _ = common.timed(lambda: workspace.save_vectors(dataset_id, KEY, data))
        finally:
            store.INDEX_MIN_ROWS = threshold
        flat = _store_search(workspace, dataset_id, queries, exact["top"])
        table_name = vectors_table_name(KEY)
        store.INDEX_MIN_ROWS = min(threshold, len(data))  # the quick run indexes its small table too
        try:
            index_seconds, _ = common.timed(lambda: workspace._maybe_index(table_name))
        finally:
            store.INDEX_MIN_ROWS = threshold
        indexed = _store_search(workspace, dataset_id, queries, exact["top"])
        table = workspace.db.open_table(table_name)
        candidates = [_tuned_search(table, dataset_id, queries, exact["top"], *setting) for setting in CANDIDATES]
    return {
        "device": common.device_report(),
        "quick": quick,
        "rows": len(data),
        "dim": data.shape[1],
        "queries": len(queries),
        "index_min_rows": threshold,
        "nprobes": store.SEARCH_NPROBES,
        "refine": store.SEARCH_REFINE,
        "save_seconds": save_seconds,
        "index_seconds": index_seconds,
        "exact": {key: value for key, value in exact.items() if key != "top"},
        "flat": flat,
        "indexed": indexed,
        "candidates": candidates,
    }


def _workspace(folder: Path, n_docs: int) -> tuple[Workspace, str]:
    workspace = Workspace(folder / "workspace")
    documents = pd.DataFrame(
        {"doc_id": [str(i) for i in range(n_docs)], "text": [f"document {i}" for i in range(n_docs)]}
    )
    return workspace, workspace.add_dataset("search bench", documents, ["synthetic"], {})


def _exact_search(data: np.ndarray, queries: np.ndarray) -> dict[str, Any]:
    """Brute-force cosine top-10 per query with numpy (rows normalised once, before timing)."""
    unit = data / np.linalg.norm(data, axis=1, keepdims=True)
    top, seconds = [], []
    for query in queries:
        elapsed, best = common.timed(lambda query=query: _top(unit @ (query / np.linalg.norm(query))))
        top.append(best)
        seconds.append(elapsed)
    return {"top": top} | _latency(seconds)


def _top(scores: np.ndarray) -> np.ndarray:
    candidates = np.argpartition(-scores, LIMIT)[:LIMIT]
    return candidates[np.argsort(-scores[candidates])]


def _store_search(workspace: Workspace, dataset_id: str, queries: np.ndarray, truth: list[np.ndarray]) -> dict:
    for query in queries[:3]:  # warm-up: open files, load the index
        workspace.search_documents(dataset_id, KEY, query, LIMIT)
    seconds, found = [], []
    for query in queries:
        elapsed, hits = common.timed(lambda query=query: workspace.search_documents(dataset_id, KEY, query, LIMIT))
        seconds.append(elapsed)
        found.append(hits["position"].to_numpy())
    return _latency(seconds) | {"recall_at_10": _recall(found, truth)}


def _tuned_search(
    table: Any, dataset_id: str, queries: np.ndarray, truth: list[np.ndarray], nprobes: int, refine: int | None
) -> dict:
    """The store's query with explicit nprobes / refine_factor."""

    def search(query: np.ndarray) -> np.ndarray:
        builder = (
            table.search(np.asarray(query, dtype=np.float32))
            .distance_type("cosine")
            .where(f"dataset_id = '{dataset_id}'", prefilter=True)
            .select(["position", "_distance"])
            .nprobes(nprobes)
            .limit(LIMIT)
        )
        if refine is not None:
            builder = builder.refine_factor(refine)
        return builder.to_pandas()["position"].to_numpy()

    for query in queries[:3]:
        search(query)
    seconds, found = [], []
    for query in queries:
        elapsed, hits = common.timed(lambda query=query: search(query))
        seconds.append(elapsed)
        found.append(hits)
    return {"nprobes": nprobes, "refine_factor": refine} | _latency(seconds) | {"recall_at_10": _recall(found, truth)}


def _latency(seconds: list[float]) -> dict[str, float]:
    milliseconds = np.asarray(seconds) * 1000
    return {"p50_ms": float(np.percentile(milliseconds, 50)), "p95_ms": float(np.percentile(milliseconds, 95))}


def _recall(found: list[np.ndarray], truth: list[np.ndarray]) -> float:
    return float(np.mean([len(np.intersect1d(f, t)) / LIMIT for f, t in zip(found, truth, strict=True)]))


def markdown(result: dict[str, Any]) -> str:
    rows = [
        ["exact numpy (baseline)", result["exact"]["p50_ms"], result["exact"]["p95_ms"], 1.0],
        [
            "store search, no index (flat)",
            result["flat"]["p50_ms"],
            result["flat"]["p95_ms"],
            result["flat"]["recall_at_10"],
        ],
        [
            f"store search, IVF-PQ index (the store's nprobes {result['nprobes']}, refine factor {result['refine']})",
            result["indexed"]["p50_ms"],
            result["indexed"]["p95_ms"],
            result["indexed"]["recall_at_10"],
        ],
    ]
    rows += [
        [
            f"candidate: index, nprobes {c['nprobes']}, refine factor {c['refine_factor']}",
            c["p50_ms"],
            c["p95_ms"],
            c["recall_at_10"],
        ]
        for c in result["candidates"]
    ]
    table = common.markdown_table(["search", "p50 ms", "p95 ms", "recall@10 vs exact"], rows)
    return f"""{result["rows"]:,} x {result["dim"]} vectors, {result["queries"]} queries (held-out BBC articles), top 10
by cosine. The store builds its IVF-PQ index (sqrt(rows) partitions) inside `save_vectors` once a vectors table holds
`INDEX_MIN_ROWS` = {result["index_min_rows"]:,} rows. Saving the vectors took {result["save_seconds"]:.1f} s, building
the index {result["index_seconds"]:.1f} s.

{table}"""


def main() -> None:
    args = common.parser(__doc__.splitlines()[0]).parse_args()
    result = run(args.quick, args.cache)
    common.publish(NAME, result, args, markdown)


if __name__ == "__main__":
    main()
