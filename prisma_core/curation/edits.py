"""The analyst's own words: renames, merged and split themes, hidden and pinned concepts, stored as edits of a run.

Every edit is a record of the workspace's `edits` table (who, when, what), keyed by (level, id); an undo is one more
record naming the edit it cancels, so nothing is ever deleted. `applied_edits.apply_edits` turns a run as trained
into the run as the analyst shaped it, in the read model (`runs.load_run`), so every page, the export and the report
show it.

A feature's new name is also stored as the analyst's label of the feature (`interpret.manual_labels`), the one the
label editor lists and the label scores score; its edit record says who renamed it and lets the rename be undone.

Each edit keeps the members of the concept it was made on (a theme's, sub-theme's or family's features). A concept
regrouped since (other themes, families rebuilt) keeps an edit only while it still holds at least half of those
members (Jaccard >= SAME_CONCEPT); other edits stay stored and are listed as not applied.

Sub-themes follow their themes: those of a merged theme join the theme it was merged into, those of a hidden theme
are hidden with it (their documents, now in another theme, have no sub-theme there).
"""

from __future__ import annotations

import getpass
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime

import pandas as pd

from prisma_core.errors import SettingsError
from prisma_core.interpret.manual_labels import save_manual_label
from prisma_core.names import checked_description, checked_name, level_word
from prisma_core.run_shape.loaded_run import LoadedRun
from prisma_core.store import EditRecord, Workspace, new_id

LEVELS = ("theme", "subtheme", "family", "feature")
"""The levels an edit names a concept at. A sub-theme is renamed or pinned; it is hidden with its theme."""
ACTIONS = ("rename", "merge", "split", "hide", "pin")
"""What an edit does (an undo is one more record, `UNDO`)."""
UNDO = "undo"
DISMISS = "dismiss"
"""A record of a run saying that an edit of an earlier run, which did not carry, is not wanted here (its
`carried_from` names that edit): it is no longer announced, nor carried again."""
SAME_CONCEPT = 0.5
"""Share of an edit's members (Jaccard) a regrouped theme or family must still hold to keep the edit."""


def author() -> str:
    """Who edits: the operating-system user running the app or the command line."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "analyst"


def active_edits(records: Iterable[EditRecord]) -> list[EditRecord]:
    """The edits that count, oldest first: every edit no undo cancelled (undos and dismissals excluded)."""
    records = list(records)
    undone = {record.undoes for record in records if record.action == UNDO}
    return [record for record in records if record.action not in (UNDO, DISMISS) and record.edit_id not in undone]


def members_of(run: LoadedRun, level: str, target: int) -> list[int]:
    """The features a concept holds, as shown now: a theme's, a family's, or the feature itself. A concept the
    run does not show (unknown, merged away or hidden) raises SettingsError."""
    _check_level(level)
    if level == "theme":
        members = listed_features(run.theme_info, level, target)
        if members is None:
            raise SettingsError(f"This run shows no theme {target}: pick one of {_ids(run.theme_info['theme_id'])}.")
        return members
    if level == "subtheme":
        if run.subtheme_info.empty:
            raise SettingsError("This run has no sub-themes: regroup its themes to make them, or edit its themes.")
        members = listed_features(run.subtheme_info, level, target)
        if members is None:
            raise SettingsError(f"This run shows no sub-theme {target}.")
        return members
    if level == "family":
        family = next((family for family in run.families if family.family_id == target), None)
        if family is None:
            raise SettingsError(f"This run shows no family {target}.")
        return list(family.members)
    shown = run.features.loc[~run.features["hidden"], "feature_id"]
    if target not in set(shown.tolist()):
        raise SettingsError(f"This run shows no feature {target}.")
    return [int(target)]


def listed_features(info: pd.DataFrame, level: str, target: int) -> list[int] | None:
    """The features of theme or sub-theme `target` in its level's info table, None when it is not listed."""
    rows = info.loc[info[f"{level}_id"] == target, "features"]
    return None if rows.empty else [int(f) for f in rows.iloc[0]]


def _check_level(level: str) -> None:
    if level not in LEVELS:
        raise SettingsError(f"level must be one of {', '.join(LEVELS)}; got {level!r}.")


def _ids(values: Iterable[int]) -> str:
    return ", ".join(str(int(v)) for v in values)


def _record(run_id: str, action: str, level: str, target: int, value: dict, carried_from: str = "") -> EditRecord:
    return EditRecord(
        edit_id=new_id("edit"),
        run_id=run_id,
        created_at=datetime.now(UTC).isoformat(timespec="microseconds"),
        author=author(),
        action=action,
        level=level,
        target=int(target),
        value=value,
        undoes="",
        carried_from=carried_from,
    )


def rename(
    workspace: Workspace,
    run: LoadedRun,
    level: str,
    target: int,
    name: str,
    description: str = "",
    carried_from: str = "",
) -> EditRecord:
    """Gives a theme, family or feature the analyst's name (and description), checked as every name is
    (`names.checked_name`)."""
    name, description = checked_name(name, f"The {level_word(level)}'s name"), checked_description(description)
    members = members_of(run, level, target)
    value = {"name": name, "description": description.strip(), "members": members}
    run_id = run.record.run_id
    if level == "feature":
        before = workspace.labels.of(run_id)
        preferred = before[(before["feature_id"] == target) & before["preferred"].astype(bool)]
        interpretation = save_manual_label(workspace, run_id, target, name, description)
        previous = str(preferred["interpretation_id"].iloc[-1]) if len(preferred) else ""
        value |= {"interpretation_id": interpretation, "previous": previous}
    record = _record(run_id, "rename", level, target, value, carried_from)
    workspace.edits.add([record])
    return record


def merge_themes(
    workspace: Workspace, run: LoadedRun, into: int, others: Sequence[int], carried_from: str = ""
) -> EditRecord:
    """Merges themes `others` into theme `into`: their documents and features become its own."""
    others = sorted({int(t) for t in others} - {int(into)})
    if not others:
        raise SettingsError("Pick at least one other theme to merge into this one.")
    members = {str(t): members_of(run, "theme", t) for t in [int(into), *others]}
    record = _record(run.record.run_id, "merge", "theme", into, {"themes": others, "members": members}, carried_from)
    workspace.edits.add([record])
    return record


def split_theme(workspace: Workspace, run: LoadedRun, target: int, carried_from: str = "") -> EditRecord:
    """Splits a theme into its sub-themes: each becomes a theme of its own, named as the sub-theme was."""
    members = members_of(run, "theme", target)
    subthemes = run.subtheme_info.loc[run.subtheme_info["theme_id"] == target, "subtheme_id"].astype(int).tolist()
    if len(subthemes) < 2:
        raise SettingsError(
            f"Theme {target} has {'one sub-theme' if subthemes else 'no sub-themes'}: there is nothing to split it "
            "into. Regroup the run with more sub-themes first."
        )
    record = _record(
        run.record.run_id, "split", "theme", target, {"members": members, "subthemes": subthemes}, carried_from
    )
    workspace.edits.add([record])
    return record


def hide(workspace: Workspace, run: LoadedRun, level: str, target: int, carried_from: str = "") -> EditRecord:
    """Hides a concept from every view, the export and the report; it stays stored and can be shown again
    (`undo`). A hidden theme's documents and features go to their next strongest theme."""
    if level == "subtheme":
        raise SettingsError(
            "A sub-theme cannot be hidden on its own (its documents stay in its theme): hide its theme or its features."
        )
    value = {"members": members_of(run, level, target)}
    record = _record(run.record.run_id, "hide", level, target, value, carried_from)
    workspace.edits.add([record])
    return record


def pin(workspace: Workspace, run: LoadedRun, level: str, target: int, carried_from: str = "") -> EditRecord:
    """Pins a concept to the top of its lists."""
    value = {"members": members_of(run, level, target)}
    record = _record(run.record.run_id, "pin", level, target, value, carried_from)
    workspace.edits.add([record])
    return record


def undo(workspace: Workspace, run_id: str, edit_id: str) -> EditRecord:
    """Cancels an edit (a hidden concept is shown again, a pin lifted, a name given back)."""
    records = workspace.edits.of(run_id)
    edit = next((record for record in active_edits(records) if record.edit_id == edit_id), None)
    if edit is None:
        raise SettingsError(f"Run {run_id} has no edit {edit_id} to undo (unknown, or undone already).")
    if edit.action == "rename" and edit.level == "feature":
        _give_back_label(workspace, run_id, edit)
    record = replace(_record(run_id, UNDO, "", -1, {}), undoes=edit_id)
    workspace.edits.add([record])
    return record


def _give_back_label(workspace: Workspace, run_id: str, edit: EditRecord) -> None:
    """The label a feature showed before the rename is shown again."""
    previous = edit.value.get("previous", "")
    if previous:
        workspace.labels.prefer(run_id, edit.target, previous)
    else:
        workspace.labels.clear_preference(run_id, edit.target)


def dismiss(workspace: Workspace, run_id: str, earlier: EditRecord) -> EditRecord:
    """Records that an earlier run's edit, which did not carry to this run, is not wanted here."""
    record = _record(run_id, DISMISS, earlier.level, -1, {}, f"{earlier.run_id}/{earlier.edit_id}")
    workspace.edits.add([record])
    return record


def describe(edit: EditRecord) -> str:
    """An edit in words: "theme 2 renamed “Politics”", "themes 3, 4 merged into theme 1"."""
    what = f"{level_word(edit.level)} {edit.target}"
    if edit.action == "rename":
        return f"{what} renamed “{edit.value['name']}”"
    if edit.action == "merge":
        return f"themes {_ids(edit.value['themes'])} merged into theme {edit.target}"
    if edit.action == "split":
        return f"{what} split into its {len(edit.value['subthemes'])} sub-themes"
    return f"{what} {'hidden' if edit.action == 'hide' else 'pinned to the top'}"
