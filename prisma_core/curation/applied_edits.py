"""The run as the analyst shaped it: the edit records of a run (`edits`) applied one by one to the read model, each
kept only while its concept still holds enough of the members it was made on (`edits.SAME_CONCEPT`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import scipy.sparse as sp

from prisma_core.concepts.subthemes import SubThemes
from prisma_core.concepts.themes import NO_THEME, Themes
from prisma_core.curation.edits import SAME_CONCEPT, active_edits, listed_features
from prisma_core.curation.theme_split import split_into_subthemes
from prisma_core.run_shape.loaded_run import Edited, LoadedRun
from prisma_core.store import EditRecord, NamedFamily
from prisma_core.store.schemas import MANUAL_SOURCE


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
    subtheme_info = subtheme_info.assign(features=[_shown(fs, hidden) for fs in subtheme_info["features"]])
    families = [kept for family in families if (kept := _without_features(family, hidden)) is not None]
    theme_info = theme_info.sort_values(["pinned", "theme_id"], ascending=[False, True], kind="stable")
    subtheme_info = subtheme_info.sort_values(["pinned", "subtheme_id"], ascending=[False, True], kind="stable")
    pinned = {e.target for e in applied if e.action == "pin" and e.level == "family"}
    families.sort(key=lambda family: family.family_id not in pinned)
    subthemes = _shown_subthemes(run, subtheme_info)
    if subthemes is not None:
        features = features.assign(subtheme_id=subthemes.feature_subtheme(features["theme_id"].to_numpy()))
    shown = {"n_themes": len(theme_info), "n_subthemes": len(subtheme_info), "n_families": len(families)}
    edited = replace(
        run,
        record=replace(run.record, metrics=run.record.metrics | shown),
        features=features,
        themes=themes,
        theme_info=theme_info.reset_index(drop=True),
        subtheme_info=subtheme_info.reset_index(drop=True),
        subthemes=subthemes,
    )
    return replace(edited, families=families), Edited(tuple(applied), tuple(not_applied))


def _shown(features: Sequence[int], hidden: set[int]) -> list[int]:
    return [int(f) for f in features if int(f) not in hidden]


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
            return listed_features(self.theme_info if level == "theme" else self.subtheme_info, level, target)
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
        info = info.assign(features=[_shown(fs, gone) for fs in info["features"]])
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
