"""Commands that make or rebuild a run, and write it out: run, train, themes, families, export, report, trends."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from prisma_core.cli.flags import chosen_dataset, config_from_args, ingest_config
from prisma_core.cli.output import ProgressBars, print_finished, print_themes, print_trained, print_trends
from prisma_core.pipeline import Workspace
from prisma_core.pipeline.settings import EmbedConfig, FamilyConfig, ReportConfig, SAEConfig, ThemeConfig, TrendConfig

if TYPE_CHECKING:
    from prisma_core.pipeline import Finished


def sae_on_suggestion(args: argparse.Namespace) -> Callable[[SAEConfig], SAEConfig]:
    """The SAE flags given, on top of the settings suggested for the dataset (`train` and `run` start from them)."""
    return functools.partial(config_from_args, SAEConfig, args, "")


def cmd_run(workspace: Workspace, args: argparse.Namespace) -> None:
    from prisma_core import pipeline

    bars = ProgressBars()

    def show(finished: Finished) -> None:
        bars.close()
        print_finished(workspace, finished)

    chained = pipeline.ingest_embed_train(
        workspace,
        pipeline.NewDataset(args.files, args.name, ingest_config(args)),
        embed_config=config_from_args(EmbedConfig, args, "embed_"),
        sae_config=sae_on_suggestion(args),
        family_config=config_from_args(FamilyConfig, args),
        theme_config=config_from_args(ThemeConfig, args),
        progress=bars,
        on_finished=show,
    )
    if args.out:
        cmd_export(workspace, args, chained.run_id)


def cmd_train(workspace: Workspace, args: argparse.Namespace) -> None:
    from prisma_core import pipeline

    dataset_id = chosen_dataset(workspace, args)
    embed_config = config_from_args(EmbedConfig, args, "embed_")
    suggested = pipeline.suggested_sae_config(workspace, dataset_id, embed_config)
    bars = ProgressBars()
    summary = pipeline.train_run(
        workspace,
        dataset_id,
        sae_config=sae_on_suggestion(args)(suggested),
        embed_config=embed_config,
        family_config=config_from_args(FamilyConfig, args),
        theme_config=config_from_args(ThemeConfig, args),
        progress=bars,
    )
    bars.close()
    print_trained(workspace, summary)


def cmd_themes(workspace: Workspace, args: argparse.Namespace) -> None:
    from prisma_core import pipeline

    run_id = workspace.run_or_latest(args.run).run_id
    themes = pipeline.rebuild_themes(workspace, run_id, config_from_args(ThemeConfig, args), ProgressBars())
    n_subthemes = len(workspace.groups.subthemes(run_id))
    print(f"run {run_id}: {themes.n_themes} themes, {n_subthemes} sub-themes")
    print_themes(workspace, run_id)


def cmd_families(workspace: Workspace, args: argparse.Namespace) -> None:
    from prisma_core import pipeline

    run_id = workspace.run_or_latest(args.run).run_id
    families = pipeline.rebuild_families(workspace, run_id, config_from_args(FamilyConfig, args), ProgressBars())
    print(f"run {run_id}: {len(families)} families")
    for family in families[:20]:
        print(f"  #{family.family_id} {family.label} ({len(family.members)} features)")


def cmd_export(workspace: Workspace, args: argparse.Namespace, run_id: str | None = None) -> None:
    from prisma_core import pipeline

    paths = pipeline.export_run(workspace, run_id or args.run, args.out)
    print(f"exported {len(paths)} files to {Path(args.out).resolve()}")


def cmd_report(workspace: Workspace, args: argparse.Namespace) -> None:
    from prisma_core.pipeline import load_run
    from prisma_core.pipeline.report.writer import write_report

    run = load_run(workspace, args.run)
    path = write_report(workspace, run, args.out, config_from_args(ReportConfig, args))
    print(f"report of run {run.record.run_id} written to {path} ({path.stat().st_size / 2**20:.1f} MB)")


def cmd_trends(workspace: Workspace, args: argparse.Namespace) -> None:
    from prisma_core.pipeline import load_run
    from prisma_core.pipeline.trends import write_trends

    config = config_from_args(TrendConfig, args)
    run = load_run(workspace, args.run)
    path, found = write_trends(workspace, run, args.out, config)
    print_trends(run.record.run_id, found, config.max_q)
    print(f"every concept and period written to {path}")
