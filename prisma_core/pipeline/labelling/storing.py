"""Storing what a label batch made: its stage record, and group labels written onto the groups stored now (their
labels only, never the whole set)."""

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from prisma_core.interpret.labeller import Labeller, LabelResult
from prisma_core.lineage import record_stage
from prisma_core.pipeline.labelling.job import LabelConfig, LabelSummary
from prisma_core.store import GroupLabel, RunRecord, Workspace
from prisma_core.store.stages import FAMILIES, KEYWORDS, LABELLING, SUBTHEMES, THEMES, tables_of


def record_batch(
    workspace: Workspace, record: RunRecord, kind: str, labeller: Labeller, config: LabelConfig, summary: LabelSummary
) -> None:
    """The labelling batch's stage record, once its labels are stored (the labeller's settings, a server's secrets
    left out); then the tables the batch wrote to a few labels at a time are compacted."""
    settings = {"kind": kind, **labeller.record(), "labels": asdict(config)}
    record_stage(workspace, LABELLING, record.run_id, record.dataset_id, settings, asdict(summary), record.run_id)
    workspace.compact(LABEL_TABLES)


LABEL_TABLES = tables_of((KEYWORDS, FAMILIES, THEMES, SUBTHEMES))
"""The tables labelling batches write to (feature labels and their scores; family, theme and sub-theme labels)."""


@dataclass(frozen=True)
class GroupTable:
    """Where one kind of group is stored: its table, how to read its rows, and which fields hold what."""

    kind: str  # a key of prompts.GROUP_KINDS
    stage: str  # the progress stage name
    name: str  # the table
    id_key: str
    members_key: str
    read: Callable[[Workspace, str], list[dict[str, Any]]]


def _family_rows(workspace: Workspace, run_id: str) -> list[dict[str, Any]]:
    """Families as rows, like themes, for the labelling code that names both."""
    return [asdict(family) for family in workspace.groups.families(run_id)]


def _theme_rows(workspace: Workspace, run_id: str) -> list[dict[str, Any]]:
    return workspace.groups.themes(run_id)


def _subtheme_rows(workspace: Workspace, run_id: str) -> list[dict[str, Any]]:
    return workspace.groups.subthemes(run_id)


FAMILIES = GroupTable("family", "family labels", "families", "family_id", "members", _family_rows)
THEMES = GroupTable("theme", "theme labels", "themes", "theme_id", "features", _theme_rows)
SUBTHEMES = GroupTable("subtheme", "sub-theme labels", "subthemes", "subtheme_id", "features", _subtheme_rows)


GROUP_SAVE_EVERY = 10
"""Group labels are written after this many new ones (and at the end): a crash loses at most these."""


def save_group_labels(
    workspace: Workspace,
    run_id: str,
    table: GroupTable,
    labelled_from: list[dict[str, Any]],
    made: dict[int, LabelResult],
) -> None:
    """Write the labels made onto the groups stored now that still hold the members they were labelled from; only
    their labels change, so a rebuild that landed meanwhile is never undone (see `Groups.label`)."""
    members_of = {int(g[table.id_key]): [int(m) for m in g[table.members_key]] for g in labelled_from}
    labels = [
        GroupLabel(group_id, members_of[group_id], result.label, result.model) for group_id, result in made.items()
    ]
    workspace.groups.label(table.name, run_id, table.id_key, table.members_key, labels)
