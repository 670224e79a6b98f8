"""Storing what a label batch made: its stage record, and group labels written onto the groups stored now."""

from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any

from prisma_core.interpret.labelling.job import LabelConfig, LabelSummary
from prisma_core.interpret.ollama_labeller import LabelResult, OllamaConfig
from prisma_core.lineage import record_stage
from prisma_core.store import NamedFamily, RunRecord, Workspace


def record_batch(
    workspace: Workspace, record: RunRecord, kind: str, ollama: OllamaConfig, config: LabelConfig, summary: LabelSummary
) -> None:
    """The labelling batch's stage record, once its labels are stored (the server's secrets are left out); then the
    tables the batch wrote to a few labels at a time are compacted."""
    server = {setting.name: getattr(ollama, setting.name) for setting in fields(ollama) if setting.repr}
    settings = {"kind": kind, "ollama": server, "labels": asdict(config)}
    record_stage(workspace, "labelling", record.run_id, record.dataset_id, settings, asdict(summary), record.run_id)
    workspace.compact(LABEL_TABLES)


LABEL_TABLES = ("interpretations", "families", "themes")
"""The tables labelling batches write to (feature labels and their scores; family and theme labels)."""


@dataclass(frozen=True)
class GroupTable:
    """Where one kind of group is stored: how to read and replace its rows, and which fields hold what."""

    kind: str  # a key of prompts.GROUP_KINDS
    stage: str  # the progress stage name
    id_key: str
    members_key: str
    read: Callable[[Workspace, str], list[dict[str, Any]]]
    save: Callable[[Workspace, str, list[dict[str, Any]]], None]


FAMILIES = GroupTable(
    "family",
    "family labels",
    "family_id",
    "members",
    lambda workspace, run_id: [asdict(family) for family in workspace.families(run_id)],
    lambda workspace, run_id, rows: workspace.save_families(run_id, [NamedFamily(**row) for row in rows]),
)
"""Families as rows, like themes, for the labelling code that names both."""
THEMES = GroupTable("theme", "theme labels", "theme_id", "features", Workspace.themes, Workspace.save_themes)


GROUP_SAVE_EVERY = 10
"""Group labels are written after this many new ones (and at the end): a crash loses at most these."""


def save_group_labels(
    workspace: Workspace,
    run_id: str,
    table: GroupTable,
    labelled_from: list[dict[str, Any]],
    made: dict[int, LabelResult],
) -> None:
    """Write the labels made onto the groups stored now, matched by id and members (a rebuild is respected)."""
    members_of = {int(g[table.id_key]): list(g[table.members_key]) for g in labelled_from}
    updated, changed = [], False
    for group in table.read(workspace, run_id):
        group_id = int(group[table.id_key])
        result = made.get(group_id)
        if result is not None and list(group[table.members_key]) == members_of.get(group_id):
            changed |= (group["label"], group["label_source"]) != (result.label, result.model)
            group = group | {"label": result.label, "label_source": result.model}
        updated.append(group)
    if changed:
        table.save(workspace, run_id, updated)
