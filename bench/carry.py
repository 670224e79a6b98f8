"""Benchmark 15: do the analyst's edits survive a new training? Concepts of runs trained with other seeds matched.

    .venv/bin/python -m bench.carry --workspace WORKSPACE

WORKSPACE holds the shared corpora embedded and trained with the default settings and seeds 0, 1 and 2 (the
quality benchmark's workspace, section 7; copy it first: this only reads it). For every dataset, the newest run of
each seed, and for every pair of them, `prisma_core.carryover.carry.match_runs` pairs the first run's concepts with the
second's, as a new training does before it carries edits:
- themes matched: share of the first run's themes with a clear match (documents' Jaccard >= 0.5, Hungarian pairs);
- reliable features matched: share of the features found in every training (`found_in`) with a clear match
  (mutual best activation correlation >= 0.7); all firing features the same;
- families matched: share of the families with a clear match (matched features' Jaccard >= 0.5).
An edit of a concept is carried exactly when its concept has a clear match, so these shares are the share of
renames, hides and pins carried over; the rest are listed for the analyst to apply by hand.
"""

from __future__ import annotations

import argparse
import itertools
import time
from typing import Any

import numpy as np

from prisma_core.carryover import carry
from prisma_core.reading.runs import load_run, trainings_compared
from prisma_core.run_shape.run_settings import run_settings
from prisma_core.store import Workspace


def run(workspace_path: str) -> list[dict[str, Any]]:
    workspace = Workspace(workspace_path)
    rows = []
    for dataset in workspace.datasets():
        newest = {run_settings(record).sae.seed: record for record in workspace.runs(dataset.dataset_id)}
        if len(newest) < 2:
            continue
        loaded = {seed: load_run(workspace, record.run_id, with_edits=False) for seed, record in sorted(newest.items())}
        for a, b in itertools.combinations(loaded, 2):
            rows.append({"dataset": dataset.name, "seeds": f"{a} -> {b}"} | _pair(loaded[a], loaded[b]))
    return rows


def _pair(old: Any, new: Any) -> dict[str, Any]:
    started = time.perf_counter()
    matching = carry.match_runs(old, new)
    seconds = time.perf_counter() - started
    firing = old.features[old.features["density"] > 0]
    reliable = firing[firing["found_in"] == trainings_compared(old.settings)]
    features = matching.clear("feature")
    return {
        "themes": f"{len(matching.clear('theme'))} of {len(old.theme_info)}",
        "themes_share": len(matching.clear("theme")) / max(len(old.theme_info), 1),
        "reliable_share": float(np.isin(reliable["feature_id"], list(features)).mean()),
        "n_reliable": len(reliable),
        "features_share": float(np.isin(firing["feature_id"], list(features)).mean()),
        "families_share": len(matching.clear("family")) / max(len(old.families), 1),
        "n_families": len(old.families),
        "seconds": seconds,
    }


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| corpus | seeds | themes matched | reliable features matched | all firing features | families | s |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['dataset']} | {r['seeds']} | {r['themes']} ({r['themes_share']:.0%}) | {r['reliable_share']:.0%} "
        f"(of {r['n_reliable']}) | {r['features_share']:.0%} | {r['families_share']:.0%} (of {r['n_families']}) | "
        f"{r['seconds']:.2f} |"
        for r in rows
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", required=True, help="a workspace with runs of seeds 0, 1 and 2 per dataset")
    print(markdown(run(parser.parse_args().workspace)))


if __name__ == "__main__":
    main()
