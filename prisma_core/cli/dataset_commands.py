"""Commands on datasets and the workspace: ingest, add, place, embed, list, repair, delete."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

from prisma_core.cli.flags import chosen_dataset, config_from_args, ingest_config
from prisma_core.cli.output import ProgressBars, print_embedded, print_ingested, print_placements
from prisma_core.pipeline import DamagedTableError, SettingsError, Workspace
from prisma_core.pipeline.settings import EmbedConfig, run_settings

T = TypeVar("T")


def cmd_ingest(workspace: Workspace, args: argparse.Namespace) -> None:
    from prisma_core import pipeline

    bars = ProgressBars()
    dataset_id, report = pipeline.ingest(workspace, args.files, args.name, ingest_config(args), bars)
    bars.close()
    print_ingested(dataset_id, report)


def cmd_add(workspace: Workspace, args: argparse.Namespace) -> None:
    from prisma_core.pipeline.placement import grow_dataset

    bars = ProgressBars()
    added, placements = grow_dataset(workspace, chosen_dataset(workspace, args), args.files, progress=bars)
    bars.close()
    print(f"added {added.n_added} documents: the dataset has {added.n_documents}")
    if added.already_there:
        print(f"  {len(added.already_there)} documents skipped: the dataset holds their text already")
    if added.renamed_ids:
        example = next(iter(added.renamed_ids))
        print(f"  {len(added.renamed_ids)} ids the dataset holds already got a suffix, e.g. {example}")
    print_placements(placements)


def cmd_place(workspace: Workspace, args: argparse.Namespace) -> None:
    from prisma_core.pipeline.placement import place_in_runs

    bars = ProgressBars()
    placements = place_in_runs(workspace, chosen_dataset(workspace, args), bars)
    bars.close()
    print_placements(placements)


def cmd_embed(workspace: Workspace, args: argparse.Namespace) -> None:
    from prisma_core import pipeline

    bars = ProgressBars()
    summary = pipeline.embed_dataset(
        workspace, chosen_dataset(workspace, args), config_from_args(EmbedConfig, args), bars
    )
    bars.close()
    print_embedded(summary)


def cmd_list(workspace: Workspace, args: argparse.Namespace) -> None:
    """Lists what can be read; a damaged table or a run missing from the runs table is named in a warning."""
    problems: list[str] = []
    datasets = {dataset.dataset_id: dataset for dataset in _readable(workspace.datasets, problems, [])}
    runs = _readable(workspace.runs, problems, [])
    losses = _readable(workspace.repairs.losses, problems, {})
    for dataset_id in dict.fromkeys([*datasets, *(run.dataset_id for run in runs)]):
        dataset = datasets.get(dataset_id)
        print(
            f"{dataset_id}  {dataset.name!r}  {dataset.n_documents} documents{_damaged(dataset_id, losses)}"
            if dataset
            else f"{dataset_id}  (its dataset record is missing: `python -m prisma_core repair` restores it)"
        )
        for run in (run for run in runs if run.dataset_id == dataset_id):
            m = run.metrics
            n_features = _readable(lambda run=run: len(workspace.feature_stats.of(run.run_id)), problems, "?")
            sae = run_settings(run).sae
            print(
                f"    {run.run_id}  FVU {m['fvu_holdout']:.3f}  dead {m['dead_fraction']:.1%}  "
                f"n={n_features} k={sae.k if sae is not None else '?'}{_damaged(run.run_id, losses)}"
            )
    problems += [
        f"run {run_id} is stored but missing from the runs table (its newest version file is gone); "
        "`python -m prisma_core repair` restores its record"
        for run_id in _readable(workspace.hidden_runs, problems, [])
    ]
    problems += [sentence for sentences in losses.values() for sentence in sentences]
    for problem in dict.fromkeys(problems):
        print(f"warning: {problem}")


def _damaged(subject: str, losses: dict[str, list[str]]) -> str:
    """A note after a dataset or a run that lost rows to a repair (the warnings below say what)."""
    return "  (damaged: see the warning below)" if subject in losses else ""


def _readable(read: Callable[[], T], problems: list[str], otherwise: T) -> T:
    """What `read` returns, or `otherwise` when it meets a damaged table (named in `problems`)."""
    try:
        return read()
    except DamagedTableError as error:
        problems.append(str(error))
        return otherwise


def cmd_repair(workspace: Workspace, args: argparse.Namespace) -> None:
    """Checks every table in full and restores what the store can (see `Repairs.repair`)."""
    report = workspace.repairs.repair()
    for line in report:
        print(line)
    if not report:
        print("every table reads in full and every run is listed: nothing to repair")


def cmd_delete(workspace: Workspace, args: argparse.Namespace) -> None:
    """Deletes a dataset with its runs, or one run."""
    if bool(args.dataset) == bool(args.run):
        raise SettingsError("Name what to delete: --dataset ID (with its runs) or --run ID.")
    if args.dataset:
        n_runs = len(_readable(lambda: workspace.runs(args.dataset), [], []))
        workspace.delete_dataset(args.dataset)
        print(f"deleted dataset {args.dataset} and its {n_runs} run(s)")
        return
    workspace.run(args.run)  # NotFoundError for a run that does not exist
    workspace.delete_run(args.run)
    print(f"deleted run {args.run}")
