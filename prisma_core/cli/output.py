"""What the commands show: a progress bar per stage on stderr, and each stage's outcome on stdout."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from prisma_core.pipeline import Progress, RunBehindError, Workspace

if TYPE_CHECKING:
    from prisma_core.pipeline import EmbedSummary, Finished, RunSummary
    from prisma_core.pipeline.intake import IngestReport
    from prisma_core.pipeline.read_model import Placement
    from prisma_core.pipeline.trends import ConceptTrends


class ProgressBars:
    """One tqdm bar per stage, on stderr."""

    def __init__(self) -> None:
        self.bars: dict[str, tqdm] = {}

    def __call__(self, event: Progress) -> None:
        bar = self.bars.get(event.stage)
        if bar is None or bar.total != event.total:
            if bar is not None:
                bar.close()
            bar = self.bars[event.stage] = tqdm(total=event.total, desc=event.stage, file=sys.stderr, leave=False)
        bar.n = event.done
        postfix = {name: f"{value:.4g}" for name, value in event.metrics.items()}
        bar.set_postfix(postfix or ({"": event.message} if event.message else {}), refresh=True)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()
        self.bars.clear()


def print_finished(workspace: Workspace, finished: Finished) -> None:
    """A stage of `pipeline.ingest_embed_train`, as `ingest`, `embed` and `train` print it."""
    from prisma_core.pipeline import Ingested, RunSummary

    if isinstance(finished, Ingested):
        print_ingested(finished.dataset_id, finished.report)
    elif isinstance(finished, RunSummary):
        print_trained(workspace, finished)
    else:
        print_embedded(finished)


def print_ingested(dataset_id: str, report: IngestReport) -> None:
    print(f"dataset {dataset_id}: {report.n_documents} documents from {len(report.files)} file(s)")
    if report.empty_ids:
        print(f"  {len(report.empty_ids)} empty documents left out: {', '.join(report.empty_ids[:10])}")
    if report.duplicate_text_ids:
        print(f"  {len(report.duplicate_text_ids)} documents repeat an earlier text (kept)")
    for warning in report.warnings:
        print(f"  warning: {warning}")


def print_embedded(summary: EmbedSummary) -> None:
    rate = summary.n_tokens / summary.seconds if summary.n_computed else 0.0
    print(
        f"embedded {summary.n_documents} documents ({summary.embedding_key}): {summary.n_computed} computed "
        f"in {summary.n_chunks} chunks, {summary.n_cached} from cache, {summary.seconds:.1f} s"
        + (f", {rate:,.0f} tokens/s" if rate else "")
    )
    if summary.choice is not None:
        print(f"precision: {summary.choice.reason}")


def print_trained(workspace: Workspace, summary: RunSummary) -> None:
    for warning in summary.warnings:
        print(f"warning: {warning}")
    m = summary.metrics
    holdout = (
        f"held-out FVU n/a ({m['fvu_holdout_note']})"
        if "fvu_holdout_note" in m
        else f"held-out FVU {m['fvu_holdout']:.3f} (variance explained {m['variance_explained_holdout']:.1%})"
    )
    print(
        f"run {summary.run_id}: {holdout}, train FVU {m['fvu_train']:.3f}, dead latents "
        f"{m['dead_fraction']:.1%}, mean L0 {m['mean_l0']:.1f}, {summary.n_themes} themes, "
        f"{summary.n_families} families"
    )
    print(f"  features: {_kept_features(m)}")
    print("  seconds: " + ", ".join(f"{stage} {s:.1f}" for stage, s in summary.seconds.items()))
    if summary.carried:
        print(f"  your edits of run {summary.carried.from_run}: " + "; ".join(summary.carried.summary()))
    try:
        print_themes(workspace, summary.run_id)
    except RunBehindError as error:  # documents were added while it trained: the run is saved all the same
        print(
            f"  {error.n_documents - error.n_covered:,} documents were added to the dataset while this run trained on "
            f"its first {error.n_covered:,}: `python -m prisma_core place` places them in it, without training again"
        )


def _kept_features(metrics: dict[str, Any]) -> str:
    """E.g. "61 kept of 80 per training, found in most of 3 trainings; 44 in all 3"."""
    kept, trained, compared = metrics["features_kept"], metrics["features_trained"], metrics["n_trainings"]
    if compared == 1:
        return f"{kept} (trained once: how reliably they come back was not checked)"
    return (
        f"{kept} kept of {trained} per training, found in most of {compared} trainings; "
        f"{metrics['found_in_all']} in all {compared}"
    )


def print_themes(workspace: Workspace, run_id: str) -> None:
    """The run's themes, each followed by its sub-themes, and how many documents fit no theme well."""
    from prisma_core.pipeline import load_run
    from prisma_core.pipeline.read_model import coverage_sentence

    run = load_run(workspace, run_id)
    for theme in run.theme_info.itertuples():
        print(f"  theme {theme.theme_id}: {theme.label} ({theme.n_documents} documents)")
        for sub in run.subtheme_info[run.subtheme_info["theme_id"] == theme.theme_id].itertuples():
            print(f"    sub-theme {sub.subtheme_id}: {sub.label} ({sub.n_documents} documents)")
    if run.themes is not None:
        print(f"  {coverage_sentence(run)}")


def print_placements(placements: Sequence[Placement]) -> None:
    for placement in placements:
        print(f"run {placement.run_id}: {placement.verdict()}")


SHOWN_CHANGES = 10
"""Concepts that change named per level by `trends` (the CSV holds them all)."""


def print_trends(run_id: str, found: ConceptTrends, max_q: float) -> None:
    """The periods, then per level what was tested and the concepts that change, largest change first."""
    from prisma_core.pipeline.read_model import LEVEL_PLURALS, level_word
    from prisma_core.pipeline.trends import ranked, summarise

    line = found.timeline
    undated = f"; {line.n_undated:,} documents without a date left out" if line.n_undated else ""
    print(
        f"run {run_id}, dates of '{found.column}': {len(line.periods):,} {line.period}s from {line.names[0]} to "
        f"{line.names[-1]}{undated}"
    )
    for level in found.levels:
        summary = summarise(level.trends, max_q)
        noun = level_word(level.level)
        print(f"  {LEVEL_PLURALS[level.level]}: {summary.sentence(noun, LEVEL_PLURALS[level.level])}")
        if summary.too_few_sentence():
            print(f"    {summary.too_few_sentence()}")
        changing = ranked(level.trends.tests, max_q)
        for row in changing[changing["changes"]].head(SHOWN_CHANGES).itertuples():
            print(
                f"    {level.names[int(row.feature_id)]}: {row.verdict}, {row.trend_change * 100:+.0f} points over "
                f"the span; {row.change_verdict} between the periods compared ({row.change * 100:+.0f} points)"
            )
