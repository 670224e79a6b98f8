"""The analyst's own words: renames, merged and split themes, hidden and pinned concepts, stored as edits of a run.

Every edit is a record of the workspace's `edits` table (who, when, what), keyed by (level, id); an undo is one more
record naming the edit it cancels, so nothing is ever deleted. `apply_edits` turns a run as trained into the run as
the analyst shaped it, in the read model (`runs.load_run`), so every page, the export and the report show it.

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
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import scipy.sparse as sp

from prisma_core.errors import SettingsError
from prisma_core.interpret.manual_labels import save_manual_label
from prisma_core.names import level_word
from prisma_core.store import EditRecord, NamedFamily, Workspace, new_id
from prisma_core.store.schemas import MANUAL_SOURCE
from prisma_core.subthemes import SubThemes
from prisma_core.theme_split import split_into_subthemes
from prisma_core.themes import NO_THEME, Themes

if TYPE_CHECKING:
    from prisma_core.runs import LoadedRun

LEVELS = ("theme", "subtheme", "family", "feature")
"""The levels an edit names a concept at. A sub-theme is renamed or pinned; it is hidden with its theme."""
ACTIONS = ("rename", "merge", "split", "hide", "pin")
"""What an edit does (an undo is one more record, `UNDO`)."""
UNDO = "undo"
SAME_CONCEPT = 0.5
"""Share of an edit's members (Jaccard) a regrouped theme or family must still hold to keep the edit."""


@dataclass(frozen=True)
class Edited:
    """How a run's edits were applied: those shown and those whose concept is gone or changed too much."""

    applied: tuple[EditRecord, ...] = ()
    not_applied: tuple[EditRecord, ...] = ()


def author() -> str:
    """Who edits: the operating-system user running the app or the command line."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "analyst"


def active_edits(records: Iterable[EditRecord]) -> list[EditRecord]:
    """The edits that count, oldest first: every edit no undo cancelled (undos themselves excluded)."""
    records = list(records)
    undone = {record.undoes for record in records if record.action == UNDO}
    return [record for record in records if record.action != UNDO and record.edit_id not in undone]


def members_of(run: LoadedRun, level: str, target: int) -> list[int]:
    """The features a concept holds, as shown now: a theme's, a family's, or the feature itself. A concept the
    run does not show (unknown, merged away or hidden) raises SettingsError."""
    _check_level(level)
    if level == "theme":
        members = _listed_features(run.theme_info, level, target)
        if members is None:
            raise SettingsError(f"This run shows no theme {target}: pick one of {_ids(run.theme_info['theme_id'])}.")
        return members
    if level == "subtheme":
        if run.subtheme_info.empty:
            raise SettingsError("This run has no sub-themes: regroup its themes to make them, or edit its themes.")
        members = _listed_features(run.subtheme_info, level, target)
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


def _listed_features(info: pd.DataFrame, level: str, target: int) -> list[int] | None:
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
    """Gives a theme, family or feature the analyst's name (and description)."""
    name = name.strip()
    if not name:
        raise SettingsError("Write a name first.")
    members = members_of(run, level, target)
    value = {"name": name, "description": description.strip(), "members": members}
    run_id = run.record.run_id
    if level == "feature":
        before = workspace.interpretations(run_id)
        preferred = before[(before["feature_id"] == target) & before["preferred"].astype(bool)]
        interpretation = save_manual_label(workspace, run_id, target, name, description)
        previous = str(preferred["interpretation_id"].iloc[-1]) if len(preferred) else ""
        value |= {"interpretation_id": interpretation, "previous": previous}
    record = _record(run_id, "rename", level, target, value, carried_from)
    workspace.add_edits([record])
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
    workspace.add_edits([record])
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
    workspace.add_edits([record])
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
    workspace.add_edits([record])
    return record


def pin(workspace: Workspace, run: LoadedRun, level: str, target: int, carried_from: str = "") -> EditRecord:
    """Pins a concept to the top of its lists."""
    value = {"members": members_of(run, level, target)}
    record = _record(run.record.run_id, "pin", level, target, value, carried_from)
    workspace.add_edits([record])
    return record


def undo(workspace: Workspace, run_id: str, edit_id: str) -> EditRecord:
    """Cancels an edit (a hidden concept is shown again, a pin lifted, a name given back)."""
    records = workspace.edits(run_id)
    edit = next((record for record in active_edits(records) if record.edit_id == edit_id), None)
    if edit is None:
        raise SettingsError(f"Run {run_id} has no edit {edit_id} to undo (unknown, or undone already).")
    if edit.action == "rename" and edit.level == "feature":
        _give_back_label(workspace, run_id, edit)
    record = replace(_record(run_id, UNDO, "", -1, {}), undoes=edit_id)
    workspace.add_edits([record])
    return record


def _give_back_label(workspace: Workspace, run_id: str, edit: EditRecord) -> None:
    """The label a feature showed before the rename is shown again."""
    previous = edit.value.get("previous", "")
    if previous:
        workspace.prefer_interpretation(run_id, edit.target, previous)
    else:
        workspace.clear_preference(run_id, edit.target)


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


# -- applying edits ----------------------------------------------------------------------------------------------


def apply_edits(run: LoadedRun, records: Sequence[EditRecord]) -> tuple[LoadedRun, Edited]:
    """The run as the analyst shaped it: names, merged and hidden themes, hidden families and features, pins.
    `records`: the run's edit records, oldest first."""
    features = run.features.assign(hidden=False, pinned=False)
    themes = run.themes
    theme_info = run.theme_info.assign(pinned=False)
    subtheme_info = run.subtheme_info.assign(pinned=False)
    families = list(run.families)
    assignment = run.subthemes.assignment if run.subthemes is not None else None
    applied, not_applied = [], []
    for edit in active_edits(records):
        state = _Shown(features, themes, theme_info, subtheme_info, families, run.codes, assignment)
        if not state.holds(edit):
            not_applied.append(edit)
            continue
        features, themes, theme_info, subtheme_info, families = state.apply(edit)
        applied.append(edit)
    features, themes, theme_info = _hidden_features_out_of_themes(features, themes, theme_info)
    hidden = set(features.loc[features["hidden"], "feature_id"].tolist())
    families = [kept for family in families if (kept := _without_features(family, hidden)) is not None]
    theme_info = theme_info.sort_values(["pinned", "theme_id"], ascending=[False, True], kind="stable")
    subtheme_info = subtheme_info.sort_values(["pinned", "subtheme_id"], ascending=[False, True], kind="stable")
    pinned = {e.target for e in applied if e.action == "pin" and e.level == "family"}
    families.sort(key=lambda family: family.family_id not in pinned)
    edited = replace(run, features=features, themes=themes, theme_info=theme_info.reset_index(drop=True))
    edited = replace(
        edited, subtheme_info=subtheme_info.reset_index(drop=True), subthemes=_shown_subthemes(run, subtheme_info)
    )
    return replace(edited, families=families), Edited(tuple(applied), tuple(not_applied))


@dataclass
class _Shown:
    """A run's concepts while its edits are applied one by one."""

    features: pd.DataFrame
    themes: Themes | None
    theme_info: pd.DataFrame
    subtheme_info: pd.DataFrame
    families: list[NamedFamily]
    codes: sp.csr_matrix
    assignment: np.ndarray | None  # each document's sub-theme (None: the run has no sub-themes)

    def current_members(self, level: str, target: int) -> list[int] | None:
        if level in ("theme", "subtheme"):
            return _listed_features(self.theme_info if level == "theme" else self.subtheme_info, level, target)
        if level == "family":
            family = next((f for f in self.families if f.family_id == target), None)
            return None if family is None else list(family.members)
        if level == "feature":
            shown = self.features.loc[~self.features["hidden"], "feature_id"]
            return [target] if target in set(shown.tolist()) else None
        return None

    def holds(self, edit: EditRecord) -> bool:
        """Whether the edit's concepts are shown and still hold enough of the members it was made on."""
        if edit.action == "merge":
            return all(self._holds("theme", int(t), m) for t, m in edit.value["members"].items())
        if edit.action == "split" and (self.themes is None or len(self._subthemes_of(edit.target)) < 2):
            return False
        return self._holds(edit.level, edit.target, edit.value.get("members", []))

    def _subthemes_of(self, theme: int) -> pd.DataFrame:
        return self.subtheme_info[self.subtheme_info["theme_id"] == theme]

    def _holds(self, level: str, target: int, members: Sequence[int]) -> bool:
        current = self.current_members(level, target)
        return current is not None and jaccard(current, members) >= SAME_CONCEPT

    def apply(
        self, edit: EditRecord
    ) -> tuple[pd.DataFrame, Themes | None, pd.DataFrame, pd.DataFrame, list[NamedFamily]]:
        action, level, target = edit.action, edit.level, edit.target
        if level == "theme":
            self._edit_theme(edit)
        elif level == "subtheme":
            self.subtheme_info = _named_or_pinned(self.subtheme_info, self.subtheme_info["subtheme_id"] == target, edit)
        elif level == "family":
            self._edit_family(edit)
        elif action in ("hide", "pin"):
            column = "hidden" if action == "hide" else "pinned"
            self.features.loc[self.features["feature_id"] == target, column] = True
        return self.features, self.themes, self.theme_info, self.subtheme_info, self.families

    def _edit_theme(self, edit: EditRecord) -> None:
        info, row = self.theme_info.copy(), self.theme_info["theme_id"] == edit.target
        if edit.action in ("rename", "pin"):
            info = _named_or_pinned(info, row, edit)
        elif edit.action == "split":
            info = self._split(info, edit.target)
        elif edit.action == "hide":
            info = info[~row]
            self.themes = _without_theme(self.themes, edit.target)
            self.subtheme_info = self.subtheme_info[self.subtheme_info["theme_id"] != edit.target]  # hidden with it
        else:
            absorbed = [int(t) for t in edit.value["themes"]]
            merged = sorted({int(f) for t in [edit.target, *absorbed] for f in self.current_members("theme", t) or []})
            pairs = zip(info["theme_id"], info["features"], strict=True)
            info["features"] = [merged if t == edit.target else fs for t, fs in pairs]
            info = info[~info["theme_id"].isin(absorbed)]
            self.themes = _merged_themes(self.themes, edit.target, absorbed)
            joined = self.subtheme_info["theme_id"].isin(absorbed)  # the merged themes' sub-themes join the theme
            self.subtheme_info = self.subtheme_info.assign(
                theme_id=self.subtheme_info["theme_id"].where(~joined, edit.target)
            )
        self.theme_info = _recount(info, self.themes)

    def _split(self, info: pd.DataFrame, theme: int) -> pd.DataFrame:
        """The theme info with `theme` replaced by one theme per sub-theme (named, described and sized as it)."""
        subthemes = self._subthemes_of(theme)
        members = self.current_members("theme", theme) or []
        split = split_into_subthemes(self.themes, self.codes, theme, members, subthemes, self.assignment)
        self.themes = split.themes
        new_rows = subthemes.assign(
            theme_id=subthemes["subtheme_id"].map(split.new_theme),
            features=[split.features[split.new_theme[int(s)]] for s in subthemes["subtheme_id"]],
            pinned=False,
        )[info.columns].sort_values("theme_id")
        sub = self.subtheme_info
        moved = sub["subtheme_id"].map(lambda subtheme: split.new_theme.get(int(subtheme), -1))
        self.subtheme_info = sub.assign(theme_id=sub["theme_id"].where(sub["theme_id"] != theme, moved))
        return pd.concat([info[info["theme_id"] != theme], new_rows], ignore_index=True)

    def _edit_family(self, edit: EditRecord) -> None:
        if edit.action == "hide":
            self.families = [f for f in self.families if f.family_id != edit.target]
        elif edit.action == "rename":
            self.families = [
                replace(f, label=edit.value["name"], label_source=MANUAL_SOURCE) if f.family_id == edit.target else f
                for f in self.families
            ]


def _shown_subthemes(run: LoadedRun, info: pd.DataFrame) -> SubThemes | None:
    """The run's sub-themes as `info` shows them: each in its theme as edited (a merged theme's sub-themes in the
    theme it joined); the documents of a sub-theme hidden with its theme have no sub-theme."""
    if run.subthemes is None:
        return None
    shown = info["subtheme_id"].to_numpy()
    theme = run.subthemes.theme.copy()
    theme[shown] = info["theme_id"].to_numpy()
    assignment = run.subthemes.assignment
    return replace(run.subthemes, theme=theme, assignment=np.where(np.isin(assignment, shown), assignment, NO_THEME))


def _named_or_pinned(info: pd.DataFrame, row: pd.Series, edit: EditRecord) -> pd.DataFrame:
    """A theme's or sub-theme's row with the analyst's name (and description), or pinned."""
    info = info.copy()
    if edit.action == "pin":
        info.loc[row, "pinned"] = True
        return info
    info.loc[row, ["label", "label_source"]] = [edit.value["name"], MANUAL_SOURCE]
    if edit.value.get("description"):
        info.loc[row, "description"] = edit.value["description"]
    return info


def jaccard(a: Iterable[int], b: Iterable[int]) -> float:
    """|a & b| / |a | b| of two sets of ids (1 for two empty sets)."""
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a | b else 1.0


def _without_theme(themes: Themes | None, theme: int) -> Themes | None:
    """The themes with one left out: its documents and features fall to their next strongest theme."""
    if themes is None:
        return None
    evidence, probabilities = themes.evidence.copy(), themes.probabilities.copy()
    evidence[:, theme] = 0.0
    probabilities[:, theme] = 0.0
    return replace(themes, evidence=evidence, probabilities=probabilities)


def _merged_themes(themes: Themes | None, into: int, absorbed: Sequence[int]) -> Themes | None:
    """Themes `absorbed` folded into theme `into`: their document probabilities added to its own, each feature's
    evidence for it the strongest it gave any of them."""
    if themes is None:
        return None
    evidence, probabilities = themes.evidence.copy(), themes.probabilities.copy()
    columns = [into, *absorbed]
    evidence[:, into] = evidence[:, columns].max(axis=1)
    probabilities[:, into] = probabilities[:, columns].sum(axis=1)
    evidence[:, absorbed] = 0.0
    probabilities[:, absorbed] = 0.0
    return replace(themes, evidence=evidence, probabilities=probabilities)


def _recount(info: pd.DataFrame, themes: Themes | None) -> pd.DataFrame:
    """Each theme's number of documents, as its documents are now."""
    if themes is None or info.empty:
        return info
    counts = np.asarray(themes.members().sum(axis=0)).ravel()
    return info.assign(n_documents=counts[info["theme_id"].to_numpy()].astype(np.int64))


def _hidden_features_out_of_themes(
    features: pd.DataFrame, themes: Themes | None, info: pd.DataFrame
) -> tuple[pd.DataFrame, Themes | None, pd.DataFrame]:
    """Hidden features belong to no theme (documents keep their themes), and every feature's theme is re-read."""
    hidden = features.loc[features["hidden"], "feature_id"].to_numpy()
    if themes is None:
        return features, themes, info
    if len(hidden):
        evidence = themes.evidence.copy()
        evidence[hidden] = 0.0
        themes = replace(themes, evidence=evidence)
        gone = set(hidden.tolist())
        info = info.assign(features=[[f for f in fs if int(f) not in gone] for fs in info["features"]])
    features = features.assign(theme_id=themes.feature_theme()[features["feature_id"].to_numpy()])
    return features, themes, info


def _without_features(family: NamedFamily, hidden: set[int]) -> NamedFamily | None:
    """The family without the hidden features (their children hang from the nearest member above them); None when
    its parent is hidden or fewer than two members are left."""
    if not hidden:
        return family
    if family.parent in hidden:
        return None
    parent_of = {child: parent for parent, child, _ in family.edges}

    def shown_above(feature: int) -> int:
        while feature in hidden:
            feature = parent_of[feature]
        return feature

    members = [m for m in family.members if m not in hidden]
    edges = [(shown_above(p), c, w) for p, c, w in family.edges if c not in hidden]
    return replace(family, members=members, edges=edges) if len(members) > 1 else None
