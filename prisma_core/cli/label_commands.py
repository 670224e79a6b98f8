"""Commands that name a run's concepts with an Ollama model and score every label: label, score."""

from __future__ import annotations

import argparse
import contextlib

from prisma_core.cli.flags import config_from_args
from prisma_core.cli.output import ProgressBars
from prisma_core.pipeline import LabellingError, Workspace
from prisma_core.pipeline.labelling import LabelConfig, LabelScope, LabelSummary, OllamaConfig
from prisma_core.pipeline.settings import ScoreConfig


def cmd_label(workspace: Workspace, args: argparse.Namespace) -> None:
    """Exit code 2 (a LabellingError) when Ollama is unreachable, the batch gave up or every label tried failed;
    what was done is kept."""
    from prisma_core.pipeline import labelling, load_run

    run = load_run(workspace, args.run)
    ollama, config = config_from_args(OllamaConfig, args), config_from_args(LabelConfig, args)
    scope = LabelScope(args.features, None if args.families else (), None if args.themes else ())
    bars = ProgressBars()
    try:
        with labelling.open_labeller(workspace, run, ollama) as labeller:
            summary = labelling.label_scope(workspace, run, labeller, config, scope, bars)
    finally:
        bars.close()
    print(f"run {run.record.run_id}")
    for level, labelled in summary.levels():
        _print_label_summary(level, labelled)
    _print_set_aside(workspace, run.record.run_id)
    if summary.stop_reason:
        raise LabellingError(summary.stop_reason)
    for level, labelled in summary.levels():
        if labelled.n_failed and not labelled.n_labelled:
            raise LabellingError(
                f"No {level} could be labelled: all {labelled.n_failed} tried failed (the first: "
                f"{labelled.first_error}). The labels they had are kept."
            )


def cmd_score(workspace: Workspace, args: argparse.Namespace) -> None:
    from prisma_core.pipeline import labelling, load_run

    run = load_run(workspace, args.run)
    run_id = run.record.run_id
    detect_with = config_from_args(OllamaConfig, args) if args.detect else None
    bars = ProgressBars()
    try:
        with contextlib.ExitStack() as stack:
            detector = stack.enter_context(labelling.ollama_labeller(detect_with)) if detect_with else None
            summary = labelling.score_run(
                workspace, run, config_from_args(ScoreConfig, args), detector, args.features, bars
            )
    finally:
        bars.close()
    print(
        f"run {run_id}: {summary.n_embedding} labels given an embedding score ({summary.n_held_out} on held-out "
        f"documents, {summary.n_in_sample} on all activating documents), {summary.n_unscored} left unscored "
        "(feature active on too few documents)"
    )
    if detect_with:
        print(
            f"detection by {detect_with.model}: {summary.n_detection} labels scored, "
            f"{summary.n_detection_failed} failed"
        )
        for error in summary.errors[:5]:
            print(f"  {error}")
    _print_label_quality(workspace, run_id)
    if summary.baseline is not None and summary.baseline.n_scored:
        base = summary.baseline
        print(
            f"labels shown: mean embedding score {base.mean_score:.3f} over {base.n_scored} features; "
            f"the same labels shuffled across features: {base.shuffled_mean:.3f} (chance is 0.5); "
            f"{base.n_too_few} features fire on too few documents to score"
        )
    if summary.stop_reason:
        raise LabellingError(summary.stop_reason)


def _print_label_summary(what: str, summary: LabelSummary, max_errors: int = 5) -> None:
    print(
        f"{what}: {summary.n_labelled} labelled by {summary.model} at {summary.host}, "
        f"{summary.n_skipped} already labelled by it, {summary.n_failed} failed, {summary.n_remaining} not tried"
        + (f", {summary.not_asked(what)}" if summary.n_inactive else "")
    )
    for error in summary.errors[:max_errors]:
        print(f"  {error}")
    if len(summary.errors) > max_errors:
        print(f"  ... and {len(summary.errors) - max_errors} more failures")
    for kept in summary.set_aside:
        print(f"  {kept.sentence()}")


def _print_set_aside(workspace: Workspace, run_id: str) -> None:
    """The features whose model label is not shown because it scores worse than their keywords."""
    from prisma_core.pipeline import resolve_labels

    shown = resolve_labels(workspace.labels.of(run_id))
    kept = shown[shown["set_aside"].notna()]
    if len(kept):
        print(f"{len(kept)} features keep their keyword labels: the model's scored worse (pick either in the app)")
        for row in kept.head(10).itertuples():
            print(f"  feature {row.feature_id}: {row.label_note}")


def _print_label_quality(workspace: Workspace, run_id: str) -> None:
    from prisma_core.pipeline import labelling

    for row in labelling.label_quality(workspace, run_id).itertuples():
        detection = f", detection {row.mean_detection:.3f} ({row.n_detected} labels)" if row.n_detected else ""
        print(
            f"  {row.source}: {row.n_labels} labels, mean embedding score {row.mean_embedding:.3f} "
            f"({row.n_scored} scored){detection}"
        )
