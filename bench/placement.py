"""Benchmark 17: documents added to a dataset, placed in its run without retraining (issue 28, part 3).

    .venv/bin/python -m bench.placement [--cache DIR] [--quick]

For each shared corpus, its documents shuffled (seed 0): the first 80% ingested, embedded and trained with the
default settings (seed 0); then the other 20% added and placed (`pipeline.grow_dataset`, the "similar" addition),
and separately, on a copy, as many documents of another corpus (the "foreign" addition). Reported:
- recovery of the known categories on the added documents against the documents trained on: the accuracy of "each
  theme stands for the category most of its trained documents have" (sub-themes for MTSamples, whose 40 specialties
  are that level);
- agreement with a run trained on every document (seed 0): adjusted Rand index of the placed documents' themes with
  that run's themes for the same documents, beside the same index on the documents trained on (how much a new
  training moves the themes anyway);
- each addition's verdict (train again or not) with its three numbers;
- seconds to place against seconds to train (the same process, one after the other).
Vectors are embedded once into `--cache` (reused by later runs; a copy of the quality benchmark's workspace there
saves the embedding).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.metrics import adjusted_rand_score

from bench import common

NAME = "placement"
TITLE = "17. Adding documents without retraining: placed documents against trained ones"
CORPORA = ("bbc_news", "ag_news_test", "mtsamples")
FOREIGN = {"bbc_news": "mtsamples", "ag_news_test": "mtsamples", "mtsamples": "bbc_news"}
LABEL_LEVEL = {"bbc_news": "theme", "ag_news_test": "theme", "mtsamples": "subtheme"}
ADDED_SHARE = 0.2
QUICK_DOCS = 300
SEED = 0


def run(cache: Path, quick: bool = False, corpora: tuple[str, ...] = CORPORA) -> dict[str, Any]:
    return {
        "device": common.device_report(),
        "quick": quick,
        "corpora": {name: _corpus(name, cache, quick) for name in corpora},
    }


def _corpus(name: str, cache: Path, quick: bool) -> dict[str, Any]:
    from prisma_core import pipeline
    from prisma_core.ingest import IngestConfig
    from prisma_core.store import Workspace

    # each text once: an added text the base already holds would be skipped
    frame = common.shuffled_documents(common.CORPORA_DIR / f"{name}.parquet", SEED)
    frame = frame.head(QUICK_DOCS) if quick else frame
    n_base = round(len(frame) * (1 - ADDED_SHARE))
    files = {
        "base": frame.head(n_base),
        "added": frame.iloc[n_base:],
        "all": frame,
        "foreign": _foreign(name, len(frame) - n_base),
    }
    folder = cache / "placement" / f"{name}-{'quick' if quick else 'all'}"
    folder.mkdir(parents=True, exist_ok=True)
    for part, rows in files.items():
        rows.to_parquet(folder / f"{part}.parquet")
    workspace = Workspace(_seeded(cache, f"{name}-{'quick' if quick else 'all'}-{time.time_ns()}"))
    config = IngestConfig("text", id_column="id")
    base_id, _ = pipeline.ingest(workspace, [folder / "base.parquet"], f"{name} base", config)
    all_id, _ = pipeline.ingest(workspace, [folder / "all.parquet"], f"{name} all", config)
    pipeline.embed_dataset(workspace, base_id)
    pipeline.embed_dataset(workspace, all_id)
    started = time.perf_counter()
    base_run = pipeline.train_run(workspace, base_id)
    train_seconds = time.perf_counter() - started
    full_run = pipeline.train_run(workspace, all_id)
    foreign_copy = Workspace(shutil.copytree(workspace.path, Path(f"{workspace.path}-foreign")))
    pipeline.embed_dataset(workspace, base_id)  # the added documents' vectors are cached by the "all" dataset
    started = time.perf_counter()
    _, (similar,) = pipeline.grow_dataset(workspace, base_id, [folder / "added.parquet"])
    place_seconds = time.perf_counter() - started
    _, (foreign,) = pipeline.grow_dataset(foreign_copy, base_id, [folder / "foreign.parquet"])
    level = LABEL_LEVEL[name]
    placed = pipeline.load_run(workspace, base_run.run_id, with_edits=False)
    full = pipeline.load_run(workspace, full_run.run_id, with_edits=False)
    categories = frame["label"].astype(str).to_numpy()
    groups = _groups(placed, level)
    trained, added = np.arange(n_base), np.arange(n_base, len(frame))
    return {
        "n_documents": len(frame),
        "n_added": len(added),
        "level": level,
        "accuracy_trained": _accuracy(groups, categories, trained, trained),
        "accuracy_added": _accuracy(groups, categories, trained, added),
        "ari_with_full_trained": adjusted_rand_score(_groups(full, level)[trained], groups[trained]),
        "ari_with_full_added": adjusted_rand_score(_groups(full, level)[added], groups[added]),
        "similar": _verdict(similar),
        "foreign": _verdict(foreign) | {"corpus": FOREIGN[name]},
        "train_seconds": train_seconds,
        "place_seconds": place_seconds,
    }


def _foreign(name: str, n: int) -> pd.DataFrame:
    other = pd.read_parquet(common.CORPORA_DIR / f"{FOREIGN[name]}.parquet").sample(n, random_state=SEED)
    return other.assign(id=[f"foreign-{doc_id}" for doc_id in other["id"]])


def _seeded(cache: Path, name: str) -> Path:
    """A new workspace's folder, a copy of the quality benchmark's workspace when there is one (its vectors are the
    embedding cache)."""
    path = cache / "placement_workspace" / name
    quality = cache / "quality_workspace"
    if quality.is_dir():
        shutil.copytree(quality, path)
    return path


def _groups(run: Any, level: str) -> np.ndarray:
    """[n_documents] each document's theme (or sub-theme), -1 for none."""
    from prisma_core.reading.runs import document_themes

    return document_themes(run)[f"{level}_id"].to_numpy()


def _accuracy(groups: np.ndarray, categories: np.ndarray, decided_on: np.ndarray, scored_on: np.ndarray) -> float:
    """Share of the `scored_on` documents whose group stands for their category: the category most of the group's
    `decided_on` documents have (a document without a group, or in a group without such documents, counts as
    wrong)."""
    table = pd.crosstab(groups[decided_on], categories[decided_on])
    stands_for = table.idxmax(axis=1).to_dict()
    predicted = np.array([stands_for.get(group, None) for group in groups[scored_on]], dtype=object)
    return float((predicted == categories[scored_on]).mean())


def _verdict(placement: Any) -> dict[str, Any]:
    return {
        "retrain_advised": placement.retrain_advised,
        "detail_added": placement.detail_added,
        "detail_before": placement.detail_before,
        "no_fit_added": placement.no_fit_added,
        "no_fit_before": placement.no_fit_before,
        "reasons": placement.reasons,
    }


def markdown(result: dict[str, Any]) -> str:
    header = [
        "corpus (level)",
        "accuracy trained / added",
        "ARI with a full training: trained / added",
        "similar 20%: advised / detail / no fit",
        "foreign: advised / detail / no fit",
        "place / train s",
    ]
    rows = []
    for name, corpus in result["corpora"].items():
        similar, foreign = corpus["similar"], corpus["foreign"]
        rows.append(
            [
                f"{name} ({corpus['level']})",
                f"{corpus['accuracy_trained']:.3f} / {corpus['accuracy_added']:.3f}",
                f"{corpus['ari_with_full_trained']:.3f} / {corpus['ari_with_full_added']:.3f}",
                _said(similar),
                f"{foreign['corpus']}: {_said(foreign)}",
                f"{corpus['place_seconds']:.1f} / {corpus['train_seconds']:.1f}",
            ]
        )
    return f"## {TITLE}\n\n" + common.markdown_table(header, rows)


def _said(verdict: dict[str, Any]) -> str:
    advised = "train again" if verdict["retrain_advised"] else "no need"
    return (
        f"{advised} / {verdict['detail_added']:.0%} vs {verdict['detail_before']:.0%} / "
        f"{verdict['no_fit_added']:.0%} vs {verdict['no_fit_before']:.0%}"
    )


def main() -> None:
    parser = common.parser(__doc__.splitlines()[0])
    parser.add_argument("--corpora", nargs="+", default=list(CORPORA), choices=CORPORA)
    args = parser.parse_args()
    common.publish(NAME, run(args.cache, args.quick, tuple(args.corpora)), args, markdown)


if __name__ == "__main__":
    main()
