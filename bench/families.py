"""Benchmark 4: feature families over 200,000 documents at n = 3,072 and 12,288 features, k = 32.

    .venv/bin/python -m bench.families [--quick]

Two code distributions, k = 32 active features per document:
- "sae": a Prisma SAE trained on resampled BBC vectors encodes 200,000 resampled BBC vectors (real feature usage);
- "synthetic": power-law feature usage with a planted hierarchy (parents fire with a few of their children).
Prisma's `find_families` (blocked sparse co-occurrence counting + forests) runs in its own process, so does its
co-occurrence step alone (`cooccurrence_edges`), and so does the baseline for that step: scipy's sparse product AᵀA
thresholded by the same rule (weight at least tau, at least `min_shared` documents in common, above chance). Each
process reports its wall time and its peak resident memory (getrusage), whole process included.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from bench import common
from prisma_core.concepts.families import (
    CHANCE_SPREAD,
    FamilyConfig,
    cooccurrence_edges,
    feature_density,
    find_families,
)
from prisma_core.progress import Progress

NAME = "families"
TITLE = "4. Families: time and peak memory at 200,000 documents"
K = 32
DOCUMENTS = 200_000
FEATURES = [3_072, 12_288]
QUICK_DOCUMENTS = 5_000
QUICK_FEATURES = [768]
SAE_TRAIN_VECTORS = 20_000
TARGET_SECONDS = 10.0
TARGET_MB = 2048.0


def run(quick: bool = False, cache_dir: Path = common.RESULTS_DIR / "cache") -> dict[str, Any]:
    n_docs = QUICK_DOCUMENTS if quick else DOCUMENTS
    vectors = common.bbc_vectors(40 if quick else None, cache_dir)
    cases = []
    with tempfile.TemporaryDirectory(prefix="prisma-bench-families-") as folder:
        for n_features in QUICK_FEATURES if quick else FEATURES:
            for distribution in ("sae", "synthetic"):
                if distribution == "sae":
                    codes = sae_codes(vectors, n_features, n_docs, quick)
                else:
                    codes = synthetic_codes(n_features, n_docs)
                path = Path(folder) / f"{distribution}-{n_features}.npz"
                sp.save_npz(path, codes)
                cases.append(
                    {
                        "distribution": distribution,
                        "n_features": n_features,
                        "documents": n_docs,
                        "nnz": int(codes.nnz),
                        "active_features": int((feature_density(codes) > 0).sum()),
                        "prisma": _run_worker("prisma", path),
                        "cooccurrence": _run_worker("cooccurrence", path),
                        "baseline": _run_worker("baseline", path),
                    }
                )
    return {"device": common.device_report(), "quick": quick, "k": K, "cases": cases}


def sae_codes(vectors: np.ndarray, n_features: int, n_docs: int, quick: bool) -> sp.csr_matrix:
    """Codes of n_docs resampled BBC vectors under a Prisma SAE with n_features latents trained on resampled ones."""
    from prisma_core.sae import SAEConfig
    from prisma_core.sae.train import feature_codes, train_sae

    train = common.resample(vectors, 1_000 if quick else SAE_TRAIN_VECTORS, seed=4)
    config = SAEConfig(n_features=n_features, k=K, epochs=1 if quick else 2, n_trainings=1, device="cpu")
    model = train_sae(train, config).model
    return feature_codes(model, common.resample(vectors, n_docs, seed=5))


def synthetic_codes(n_features: int, n_docs: int, seed: int = 0) -> sp.csr_matrix:
    """Power-law usage with a hierarchy: features form groups of 8 (a parent and 7 children); each document draws
    4 groups (Zipf over groups), their parents and 3 children each, and 16 more features Zipf over all features;
    repeated picks merge, so a document has at most k = 32 active features. Values are exponential."""
    rng = np.random.default_rng(seed)
    n_groups = n_features // 8
    groups = rng.choice(n_groups, size=(n_docs, 4), p=_zipf(n_groups, rng))
    children = groups[:, :, None] * 8 + 1 + rng.integers(0, 7, size=(n_docs, 4, 3))
    noise = rng.choice(n_features, size=(n_docs, 16), p=_zipf(n_features, rng))
    columns = np.concatenate([groups * 8, children.reshape(n_docs, 12), noise], axis=1)
    rows = np.repeat(np.arange(n_docs), columns.shape[1])
    values = rng.exponential(1.0, size=columns.size).astype(np.float32)
    codes = sp.csr_matrix((values, (rows, columns.ravel())), shape=(n_docs, n_features))
    codes.sum_duplicates()
    return codes


def _zipf(n: int, rng: np.random.Generator, exponent: float = 1.1) -> np.ndarray:
    """Zipf probabilities over n items in random order."""
    weights = 1.0 / np.arange(1, n + 1) ** exponent
    return rng.permutation(weights / weights.sum())


def _run_worker(method: str, codes_file: Path) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.families", "--worker", method, "--codes", str(codes_file)]
    env = os.environ | {"PYTHONPATH": str(common.REPO)}
    output = subprocess.run(command, check=True, cwd=common.REPO, env=env, capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


# -- workers: one method in its own process, so peak memory is its own -----------------------------------------


def worker(method: str, codes_file: Path) -> dict[str, Any]:
    codes = sp.load_npz(codes_file).tocsr()
    before = common.peak_rss_mb()
    if method == "prisma":
        reported: dict[str, float] = {}

        def keep_edge_count(event: Progress) -> None:
            reported.update({"edges": event.metrics["edges"]} if "edges" in event.metrics else {})

        seconds, families = common.timed(lambda: find_families(codes, FamilyConfig(), keep_edge_count))
        found = {"families": len(families), "edges": reported.get("edges")}
    elif method == "cooccurrence":
        config = FamilyConfig()
        seconds, edges = common.timed(lambda: cooccurrence_edges(codes, config.tau, min_shared=config.min_shared))
        found = {"families": None, "edges": len(edges[0])}
    else:
        seconds, edges = common.timed(lambda: _sparse_product_edges(codes, FamilyConfig()))
        found = {"families": None, "edges": edges}
    peak = common.peak_rss_mb()
    return {"seconds": seconds, "peak_rss_mb": peak, "rss_before_mb": before, "increase_mb": peak - before} | found


def _sparse_product_edges(codes: sp.csr_matrix, config: FamilyConfig) -> int:
    """Baseline: C = AᵀA with scipy, weight C_ij / min(f_i, f_j); the edge count of pairs i < j at or above tau that
    share at least min_shared documents and fire together more often than chance (f_i f_j / n_documents by
    CHANCE_SPREAD of its square root): the rule of `cooccurrence_edges`."""
    active = codes.copy()
    active.data = np.ones_like(active.data, dtype=np.int32)
    counts = (active.T @ active).tocoo()
    density = np.asarray(active.sum(axis=0)).ravel()
    upper = counts.row < counts.col
    rows, cols, together = counts.row[upper], counts.col[upper], counts.data[upper]
    weight = together / (np.minimum(density[rows], density[cols]) + 1e-9)
    chance = density[rows].astype(np.float64) * density[cols] / max(codes.shape[0], 1)
    above_chance = together > chance + CHANCE_SPREAD * np.sqrt(chance)
    return int(((weight >= config.tau) & (together >= config.min_shared) & above_chance).sum())


def markdown(result: dict[str, Any]) -> str:
    rows = []
    for case in result["cases"]:
        p, b = case["prisma"], case["baseline"]
        co = case.get("cooccurrence", {"seconds": "-", "peak_rss_mb": "-"})  # results from before the column existed
        rows.append(
            [
                f"{case['n_features']:,}",
                case["distribution"],
                f"{case['documents']:,}",
                f"{case['active_features']:,}",
                p["seconds"],
                p["peak_rss_mb"],
                p["increase_mb"],
                p["families"],
                p["edges"],
                co["seconds"],
                co["peak_rss_mb"],
                b["seconds"],
                b["peak_rss_mb"],
                b["edges"],
            ]
        )
    header = [
        "n",
        "codes",
        "documents",
        "features in use",
        "Prisma s",
        "Prisma peak MB",
        "Prisma +MB",
        "families",
        "edges >= tau",
        "Prisma co-occurrence only s",
        "its peak MB",
        "scipy AᵀA s",
        "scipy peak MB",
        "scipy edges",
    ]
    largest = [c for c in result["cases"] if c["n_features"] == max(c["n_features"] for c in result["cases"])]
    worst_seconds = max(c["prisma"]["seconds"] for c in largest)
    worst_mb = max(c["prisma"]["peak_rss_mb"] for c in largest)
    met = worst_seconds < TARGET_SECONDS and worst_mb < TARGET_MB
    n_largest = largest[0]["n_features"]
    return f"""k = {result["k"]}; peak MB is the whole worker process (Python, numpy, scipy, networkx and the codes
included); +MB is the rise over the process after loading the codes.

{common.markdown_table(header, rows)}

- At n = {n_largest:,}: **{worst_seconds:.1f} s, {worst_mb:,.0f} MB peak** (worst of the two distributions); target
  < {TARGET_SECONDS:.0f} s and < {TARGET_MB:,.0f} MB: **{"met" if met else "missed"}**."""


def main() -> None:
    arguments = common.parser(__doc__.splitlines()[0])
    arguments.add_argument("--worker", choices=["prisma", "cooccurrence", "baseline"], help=argparse.SUPPRESS)
    arguments.add_argument("--codes", type=Path, help=argparse.SUPPRESS)
    args = arguments.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.codes)))
        return
    result = run(args.quick, args.cache)
    common.publish(NAME, result, args, markdown)


if __name__ == "__main__":
    main()
