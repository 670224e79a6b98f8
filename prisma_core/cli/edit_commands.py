"""Commands on the analyst's edits of a run: edit (list, make, undo) and carry (to a run trained again)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from prisma_core.cli.flags import config_from_args, feature_ids
from prisma_core.pipeline import SettingsError, Workspace
from prisma_core.pipeline.settings import CarryConfig, EditConfig


def cmd_edit(workspace: Workspace, args: argparse.Namespace) -> None:
    """Lists, makes or undoes an edit of a run (see `prisma_core.curation.edits`)."""
    from prisma_core.pipeline import edits, load_run

    config = config_from_args(EditConfig, args)
    run = load_run(workspace, args.run)
    run_id = run.record.run_id
    if config.action == "list":
        _print_edits(workspace.edits.of(run_id), run)
        return
    if config.action == "undo":
        undone = next((e for e in workspace.edits.of(run_id) if e.edit_id == config.edit_id), None)
        edits.undo(workspace, run_id, config.edit_id)
        print(f"run {run_id}: undone: {edits.describe(undone) if undone else config.edit_id}")
        return
    if config.id is None:
        raise SettingsError(f"--id is needed: the number of the {config.level} to {config.action}.")
    record = _make_edit(workspace, run, config)
    print(f"run {run_id}: {edits.describe(record)} (edit {record.edit_id}; undo with --action undo --edit-id ...)")


def _make_edit(workspace: Workspace, run: Any, config: EditConfig) -> Any:
    from prisma_core.pipeline import edits

    if config.action == "rename":
        return edits.rename(workspace, run, config.level, config.id, config.name, config.description)
    if config.action == "merge":
        if config.level != "theme":
            raise SettingsError("Only themes are merged: use --level theme.")
        return edits.merge_themes(workspace, run, config.id, feature_ids(config.themes))
    if config.action == "split":
        if config.level != "theme":
            raise SettingsError("Only themes are split (into their sub-themes): use --level theme.")
        return edits.split_theme(workspace, run, config.id)
    make = edits.hide if config.action == "hide" else edits.pin
    return make(workspace, run, config.level, config.id)


def _print_edits(records: Sequence[Any], run: Any) -> None:
    from prisma_core.pipeline import edits

    active = {record.edit_id for record in edits.active_edits(records)}
    skipped = {record.edit_id for record in run.edited.not_applied}
    if not records:
        print(f"run {run.record.run_id}: no edits yet")
    for record in records:
        if record.action in (edits.UNDO, edits.DISMISS):
            continue
        state = "undone" if record.edit_id not in active else "not applied" if record.edit_id in skipped else "shown"
        carried = f", carried from run {record.carried_from.split('/')[0]}" if record.carried_from else ""
        print(
            f"{record.edit_id}  {record.created_at[:19]}  {record.author}  {edits.describe(record)}  [{state}{carried}]"
        )


def cmd_carry(workspace: Workspace, args: argparse.Namespace) -> None:
    """Carries an earlier run's edits to a run and compares the two runs' concepts."""
    from prisma_core.pipeline import edits, load_run

    run_id = workspace.run_or_latest(args.run).run_id
    from_run = config_from_args(CarryConfig, args).from_run or edits.previous_edited_run(workspace, run_id)
    if from_run is None:
        raise SettingsError("No earlier run of this dataset has edits: give one with --from-run.")
    report = edits.carry_edits(workspace, from_run, run_id)
    print(f"edits of run {from_run} carried to run {run_id}")
    for line in report.summary():
        print(f"  {line}")
    old, new = load_run(workspace, from_run, with_edits=False), load_run(workspace, run_id, with_edits=False)
    table = edits.counts(
        edits.compare_runs(load_run(workspace, from_run), load_run(workspace, run_id), edits.match_runs(old, new))
    )
    for level, row in table.iterrows():
        print(f"  {level}: " + ", ".join(f"{int(row[status])} {status}" for status in edits.STATUSES))
