"""Edits that survive a new training: a new run's concepts matched to an earlier run's, and the edits carried over.

Runs of the same dataset are matched concept by concept (both runs as trained, before any edit):
- features by their activations over the same documents (`recurrence`: a mutual best match at Pearson >=
  RECURS_AT is the same feature; a mutual best from CHANGED_FEATURE up is the feature changed);
- themes by their documents: each theme's documents (those it is strongest for) of one run against the other's,
  Jaccard, paired one to one by the Hungarian assignment; a pair at CLEAR_MATCH or more is the same theme;
- families by their general concept: a family whose parent feature clearly matches the parent of a new family is that
  family; the others by their features: members mapped through the matched features, Jaccard, paired the same way.

Each edit of the earlier run whose concept has a clear match is made again on the new run (its record names the edit
it came from); the others are listed, to apply by hand (`apply_by_hand`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import scipy.sparse as sp

from prisma_core.curation import edits
from prisma_core.errors import SettingsError
from prisma_core.names import LEVEL_PLURALS, level_word
from prisma_core.reading.runs import LoadedRun, load_run
from prisma_core.sae.recurrence import RECURS_AT, activation_correlation
from prisma_core.store import EditRecord, Workspace

CLEAR_MATCH = 0.5
"""Jaccard (of documents for themes, of matched features for families) at which two runs' concepts are the same."""
CHANGED_MATCH = 0.2
"""Jaccard from which a paired theme or family counts as the same concept changed, not a new one."""
CHANGED_FEATURE = 0.4
"""Activation correlation from which a feature's mutual best match counts as the same feature changed."""
NO_MATCH = "no clear match"
ACTION_WORDS = {"rename": "renamed", "merge": "merged", "split": "split", "hide": "hidden", "pin": "pinned"}


@dataclass(frozen=True)
class Matching:
    """Two runs' concepts paired: old id -> (new id, similarity) for every pair, clear or changed."""

    features: dict[int, tuple[int, float]]
    themes: dict[int, tuple[int, float]]
    families: dict[int, tuple[int, float]]
    same_root: frozenset[int] = frozenset()  # the earlier run's families paired by their parent feature
    subthemes: dict[int, tuple[int, float]] = field(default_factory=dict)

    def clear(self, level: str) -> dict[int, int]:
        """Old id -> new id of the pairs that are clearly the same concept."""
        at = RECURS_AT if level == "feature" else CLEAR_MATCH
        pairs = self.pairs(level).items()
        return {old: new for old, (new, similarity) in pairs if similarity >= at or old in self.same_root}

    def pairs(self, level: str) -> dict[int, tuple[int, float]]:
        """Old id -> (new id, similarity) of every pair at `level`, clear or changed."""
        levels = {"feature": self.features, "theme": self.themes, "subtheme": self.subthemes}
        return levels.get(level, self.families)


@dataclass(frozen=True)
class CarryReport:
    """What carrying a run's edits to a new run did."""

    from_run: str
    to_run: str
    carried: list[tuple[EditRecord, EditRecord]] = field(default_factory=list)  # (the earlier edit, the new one)
    not_carried: list[tuple[EditRecord, str]] = field(default_factory=list)  # (the earlier edit, why)
    before: list[EditRecord] = field(default_factory=list)  # carried (or dismissed) by an earlier carry

    def summary(self) -> list[str]:
        """In words: "3 of 4 edits carried over" (and how many were carried before) and one line per kind not
        carried ("2 renamed themes have no clear match: “Politics”, “Sport”")."""
        tried = len(self.carried) + len(self.not_carried)
        if tried == 0:
            done = "1 edit" if len(self.before) == 1 else f"all {len(self.before)} edits"
            return [f"Nothing new to carry: {done} of run {self.from_run} carried before."]
        earlier = f" ({len(self.before)} carried before)" if self.before else ""
        lines = [f"{len(self.carried)} of {tried} edits carried over{earlier}"]
        kinds: dict[tuple[str, str], list[str]] = {}
        for edit, why in self.not_carried:
            if why == NO_MATCH:
                kinds.setdefault((edit.action, edit.level), []).append(_what(edit))
            else:
                lines.append(f"{edits.describe(edit)} was not carried: {why}")
        for (action, level), names in kinds.items():
            words = LEVEL_PLURALS[level] if len(names) > 1 else level_word(level)
            lines.append(
                f"{len(names)} {ACTION_WORDS[action]} {words} "
                f"{'have' if len(names) > 1 else 'has'} {NO_MATCH}: {', '.join(names)}"
            )
        return lines


def _what(edit: EditRecord) -> str:
    return f"“{edit.value['name']}”" if edit.action == "rename" else f"{level_word(edit.level)} {edit.target}"


def match_runs(old: LoadedRun, new: LoadedRun) -> Matching:
    """Pairs the concepts of two runs of the same dataset (both loaded as trained: `load_run(with_edits=False)`)."""
    if old.record.dataset_id != new.record.dataset_id:
        raise SettingsError("Runs are matched over the same documents: pick two runs of the same dataset.")
    features = _feature_pairs(old.codes, new.codes)
    families, same_root = _family_pairs(old, new, features)
    return Matching(features, _theme_pairs(old, new), families, same_root, _subtheme_pairs(old, new))


def _feature_pairs(old: sp.spmatrix, new: sp.spmatrix) -> dict[int, tuple[int, float]]:
    """Mutual best matches by activation correlation, from CHANGED_FEATURE up."""
    correlation = activation_correlation(old, new)
    if correlation.size == 0:
        return {}
    best_new, best_old = correlation.argmax(axis=1), correlation.argmax(axis=0)
    return {
        int(a): (int(b), float(correlation[a, b]))
        for a, b in enumerate(best_new)
        if best_old[b] == a and correlation[a, b] >= CHANGED_FEATURE
    }


def _theme_pairs(old: LoadedRun, new: LoadedRun) -> dict[int, tuple[int, float]]:
    if old.themes is None or new.themes is None:
        return {}
    return _document_pairs(old.themes.strongest(), old.themes.n_themes, new.themes.strongest(), new.themes.n_themes)


def _subtheme_pairs(old: LoadedRun, new: LoadedRun) -> dict[int, tuple[int, float]]:
    if old.subthemes is None or new.subthemes is None:
        return {}
    a, b = old.subthemes, new.subthemes
    return _document_pairs(a.assignment, a.n_subthemes, b.assignment, b.n_subthemes)


def _document_pairs(old: np.ndarray, n_old: int, new: np.ndarray, n_new: int) -> dict[int, tuple[int, float]]:
    """Groups of two runs (each document's group, -1 for none) paired by their documents (Jaccard, one to one)."""
    return _assigned(_jaccard_matrix(_one_hot(old, n_old), _one_hot(new, n_new)))


def _family_pairs(
    old: LoadedRun, new: LoadedRun, features: dict[int, tuple[int, float]]
) -> tuple[dict[int, tuple[int, float]], frozenset[int]]:
    """Families paired by their parent feature first, then the others by their members; with the old families paired
    by their parent."""
    if not old.families or not new.families:
        return {}, frozenset()
    clear = {a: b for a, (b, r) in features.items() if r >= RECURS_AT}
    n_features = new.codes.shape[1]
    mapped = [[clear[m] for m in family.members if m in clear] for family in old.families]
    similarity = _jaccard_matrix(
        _membership(mapped, n_features), _membership([family.members for family in new.families], n_features)
    )
    new_by_root = {family.parent: j for j, family in enumerate(reversed(new.families))}
    new_by_root = {root: len(new.families) - 1 - j for root, j in new_by_root.items()}  # the first family a root has
    by_root = {
        i: new_by_root[clear[f.parent]] for i, f in enumerate(old.families) if clear.get(f.parent) in new_by_root
    }
    rest_old = [i for i in range(len(old.families)) if i not in by_root]
    rest_new = [j for j in range(len(new.families)) if j not in set(by_root.values())]
    by_members = _assigned(similarity[np.ix_(rest_old, rest_new)])
    pairs = {i: j for i, j in by_root.items()} | {rest_old[i]: rest_new[j] for i, (j, _) in by_members.items()}
    old_ids, new_ids = [f.family_id for f in old.families], [f.family_id for f in new.families]
    paired = {old_ids[i]: (new_ids[j], float(similarity[i, j])) for i, j in pairs.items()}
    return paired, frozenset(old_ids[i] for i in by_root)


def _one_hot(assignment: np.ndarray, n: int) -> sp.csc_matrix:
    """[n_documents, n] 0/1 from each document's theme (-1: none)."""
    rows = np.flatnonzero(assignment >= 0)
    data = np.ones(len(rows), np.float64)
    return sp.csc_matrix((data, (rows, assignment[rows])), shape=(len(assignment), n))


def _membership(members: Sequence[Sequence[int]], n_features: int) -> sp.csc_matrix:
    """[n_features, n_groups] 0/1."""
    rows = [m for group in members for m in group]
    cols = [g for g, group in enumerate(members) for _ in group]
    return sp.csc_matrix((np.ones(len(rows)), (rows, cols)), shape=(n_features, len(members)))


def _jaccard_matrix(a: sp.csc_matrix, b: sp.csc_matrix) -> np.ndarray:
    """[p, q] Jaccard of every column set of `a` with every column set of `b` (same rows)."""
    overlap = (a.T @ b).toarray()
    sizes_a, sizes_b = np.asarray(a.sum(axis=0)).ravel(), np.asarray(b.sum(axis=0)).ravel()
    union = sizes_a[:, None] + sizes_b[None, :] - overlap
    return np.divide(overlap, union, out=np.zeros_like(overlap), where=union > 0)


def _assigned(similarity: np.ndarray) -> dict[int, tuple[int, float]]:
    """One-to-one pairs of rows and columns with the largest total similarity, from CHANGED_MATCH up."""
    from scipy.optimize import linear_sum_assignment  # here: 0.2 s to import, and every view imports this module

    rows, cols = linear_sum_assignment(-similarity)
    return {
        int(r): (int(c), float(similarity[r, c]))
        for r, c in zip(rows, cols, strict=True)
        if similarity[r, c] >= CHANGED_MATCH
    }


# -- the comparison ------------------------------------------------------------------------------------------------

STATUSES = ("kept", "changed", "new", "gone")


def compare_runs(old: LoadedRun, new: LoadedRun, matching: Matching) -> pd.DataFrame:
    """Every concept of both runs: level, old_id, old_label, new_id, new_label, status (kept: clearly the same;
    changed: paired but less alike; gone: only in the earlier run; new: only in the new one) and similarity."""
    frames = [
        _compare_level("theme", _theme_labels(old), _theme_labels(new), matching.themes, matching.clear("theme")),
        _compare_level("family", _family_labels(old), _family_labels(new), matching.families, matching.clear("family")),
        _compare_level(
            "feature", _feature_labels(old), _feature_labels(new), matching.features, matching.clear("feature")
        ),
    ]
    return pd.concat(frames, ignore_index=True)


def _compare_level(
    level: str, old: dict[int, str], new: dict[int, str], pairs: dict[int, tuple[int, float]], clear: dict[int, int]
) -> pd.DataFrame:
    rows = []
    for old_id, label in old.items():
        new_id, similarity = pairs.get(old_id, (None, np.nan))
        status = "gone" if new_id is None else "kept" if old_id in clear else "changed"
        rows.append(
            (level, old_id, label, new_id, new.get(new_id, "") if new_id is not None else "", status, similarity)
        )
    paired = {new_id for new_id, _ in pairs.values()}
    rows += [(level, None, "", n, label, "new", np.nan) for n, label in new.items() if n not in paired]
    columns = ["level", "old_id", "old_label", "new_id", "new_label", "status", "similarity"]
    return pd.DataFrame(rows, columns=columns).astype({"old_id": "Int64", "new_id": "Int64"})


def _theme_labels(run: LoadedRun) -> dict[int, str]:
    return {int(t): str(label) for t, label in zip(run.theme_info["theme_id"], run.theme_info["label"], strict=True)}


def _family_labels(run: LoadedRun) -> dict[int, str]:
    return {family.family_id: family.label for family in run.families}


def _feature_labels(run: LoadedRun) -> dict[int, str]:
    firing = run.features[(run.features["density"] > 0) & ~run.features["hidden"]]
    return {int(f): str(label) for f, label in zip(firing["feature_id"], firing["label"], strict=True)}


def counts(comparison: pd.DataFrame) -> pd.DataFrame:
    """Per level, how many concepts were kept, changed, new and gone."""
    table = comparison.groupby(["level", "status"]).size().unstack(fill_value=0)
    return table.reindex(columns=list(STATUSES), fill_value=0).reindex(["theme", "family", "feature"]).fillna(0)


# -- carrying edits ------------------------------------------------------------------------------------------------


def carry_edits(workspace: Workspace, from_run: str, to_run: str) -> CarryReport:
    """Makes every edit of `from_run` again on `to_run` where its concept has a clear match; edits carried before
    are not carried twice. SettingsError for a run carried to itself."""
    if from_run == to_run:
        raise SettingsError(f"Run {to_run}'s edits are its own already: name an earlier run to carry edits from.")
    old, new = load_run(workspace, from_run, with_edits=False), load_run(workspace, to_run, with_edits=False)
    matching = match_runs(old, new)
    done = {record.carried_from for record in workspace.edits.of(to_run)}
    report = CarryReport(from_run, to_run)
    shown = load_run(workspace, to_run, previous=new)
    for edit in edits.active_edits(workspace.edits.of(from_run)):
        if f"{from_run}/{edit.edit_id}" in done:
            report.before.append(edit)
            continue
        targets = _targets(edit, matching)
        if targets is None:
            report.not_carried.append((edit, NO_MATCH))
            continue
        try:
            report.carried.append((edit, redo(workspace, shown, edit, targets, f"{from_run}/{edit.edit_id}")))
        except SettingsError as error:
            report.not_carried.append((edit, str(error)))
        shown = load_run(workspace, to_run, previous=shown)
    return report


def _targets(edit: EditRecord, matching: Matching) -> list[int] | None:
    """The new run's concepts an edit goes to (the merged themes after the first, for a merge), None when one of
    them has no clear match."""
    clear = matching.clear(edit.level)
    wanted = [edit.target, *edit.value.get("themes", [])] if edit.action == "merge" else [edit.target]
    found = [clear.get(int(t)) for t in wanted]
    return None if any(t is None for t in found) else [int(t) for t in found]


def redo(workspace: Workspace, run: LoadedRun, edit: EditRecord, targets: Sequence[int], origin: str) -> EditRecord:
    """Makes `edit` (of this run or another) again on `run`'s concepts `targets` (a merge: the theme merged into,
    then the others); `origin` names the earlier edit it comes from ("" for none)."""
    target = targets[0]
    if edit.action == "rename":
        value = edit.value
        return edits.rename(workspace, run, edit.level, target, value["name"], value.get("description", ""), origin)
    if edit.action == "merge":
        return edits.merge_themes(workspace, run, target, list(targets[1:]), origin)
    if edit.action == "split":
        return edits.split_theme(workspace, run, target, origin)
    make = edits.hide if edit.action == "hide" else edits.pin
    return make(workspace, run, edit.level, target, origin)


def apply_by_hand(workspace: Workspace, run: LoadedRun, edit: EditRecord, target: int) -> EditRecord:
    """Makes an earlier run's edit on the concept the analyst picked in `run` (a rename, split, hide or pin)."""
    if edit.action == "merge":
        raise SettingsError("Merge the themes again on this run: pick the themes to merge.")
    return redo(workspace, run, edit, [int(target)], f"{edit.run_id}/{edit.edit_id}")


def previous_edited_run(workspace: Workspace, run_id: str) -> str | None:
    """The newest earlier run of the same dataset with edits, the one a new training carries edits from."""
    runs = workspace.runs()
    this = next(run for run in runs if run.run_id == run_id)
    earlier = [run for run in runs if run.dataset_id == this.dataset_id and run.created_at <= this.created_at]
    for run in reversed(earlier):
        if run.run_id != run_id and edits.active_edits(workspace.edits.of(run.run_id)):
            return run.run_id
    return None
