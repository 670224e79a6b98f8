"""Edits that do not show on a run, to announce where the analyst looks (Home and the concept's page): those made on
the run whose concept was regrouped since (`Edited.not_applied`), and those of the dataset's earlier edited run that
a new training did not carry (no clear match, or refused). Each comes with the concept of this run it fits best, so
one click makes it again there (`reapply`), or it is dismissed (`dismiss`): the run's own edit is undone, an earlier
run's is recorded as not wanted here, and neither is announced again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from prisma_core.carryover import carry
from prisma_core.curation import edits
from prisma_core.curation.applied_edits import jaccard
from prisma_core.names import level_word, unit_name
from prisma_core.reading.runs import load_run
from prisma_core.run_shape.loaded_run import LoadedRun
from prisma_core.store import EditRecord, Workspace

REGROUPED = "regrouped"
NOT_CARRIED = "not carried"


@dataclass(frozen=True)
class EditNotice:
    """An edit the run does not show, and the concepts of the run it fits best (a merge: the theme merged into, then
    the others; empty when nothing fits)."""

    edit: EditRecord
    reason: str  # REGROUPED: made on this run, its concept regrouped since; NOT_CARRIED: of an earlier run
    targets: tuple[int, ...] = ()

    @property
    def origin(self) -> str:
        """The edit as a carried record names it: "<run id>/<edit id>"."""
        return f"{self.edit.run_id}/{self.edit.edit_id}"


def edit_notices(workspace: Workspace, run: LoadedRun) -> list[EditNotice]:
    """Every edit `run` does not show: its own that no longer apply, then the earlier run's that did not carry."""
    own = [EditNotice(edit, REGROUPED, _regrouped_targets(run, edit)) for edit in run.edited.not_applied]
    return own + _not_carried(workspace, run)


def _not_carried(workspace: Workspace, run: LoadedRun) -> list[EditNotice]:
    run_id = run.record.run_id
    earlier = carry.previous_edited_run(workspace, run_id)
    if earlier is None:
        return []
    handled = {record.carried_from for record in workspace.edits.of(run_id)}  # carried, applied by hand or dismissed
    missing = [e for e in edits.active_edits(workspace.edits.of(earlier)) if f"{earlier}/{e.edit_id}" not in handled]
    if not missing:
        return []
    trained = load_run(workspace, run_id, previous=run, with_edits=False)
    matching = carry.match_runs(load_run(workspace, earlier, with_edits=False), trained)
    return [EditNotice(edit, NOT_CARRIED, _matched_targets(edit, matching)) for edit in missing]


def _wanted(edit: EditRecord) -> list[int]:
    """The concepts an edit names: the theme merged into and the merged ones, else its one concept."""
    return [edit.target, *[int(t) for t in edit.value.get("themes", [])]] if edit.action == "merge" else [edit.target]


def _matched_targets(edit: EditRecord, matching: carry.Matching) -> tuple[int, ...]:
    """The new run's concepts paired with the edit's (clearly or not): where a new training's edit fits best."""
    pairs = matching.pairs(edit.level)
    found = [pairs.get(int(t)) for t in _wanted(edit)]
    targets = [pair[0] for pair in found if pair is not None]
    return tuple(targets) if len(targets) == len(found) and len(set(targets)) == len(targets) else ()


def _regrouped_targets(run: LoadedRun, edit: EditRecord) -> tuple[int, ...]:
    """The run's concepts now sharing the most features with those the edit was made on."""
    members = edit.value.get("members", [])
    wanted = [members[str(t)] for t in _wanted(edit)] if edit.action == "merge" else [members]
    concepts = _concept_members(run, edit.level)
    targets = [max(concepts, key=lambda c: jaccard(concepts[c], old), default=None) for old in wanted]
    fits = [t is not None and jaccard(concepts[t], old) > 0 for t, old in zip(targets, wanted, strict=True)]
    return tuple(targets) if all(fits) and len(set(targets)) == len(targets) else ()


def _concept_members(run: LoadedRun, level: str) -> dict[int, list[int]]:
    """Each concept the run shows at `level`, with the features it holds."""
    if level == "theme":
        return {int(t): list(fs) for t, fs in zip(run.theme_info["theme_id"], run.theme_info["features"], strict=True)}
    if level == "subtheme":
        info = run.subtheme_info
        return {int(s): list(fs) for s, fs in zip(info["subtheme_id"], info["features"], strict=True)}
    if level == "family":
        return {family.family_id: list(family.members) for family in run.families}
    return {int(f): [int(f)] for f in run.features.loc[~run.features["hidden"], "feature_id"]}


def carried_here(workspace: Workspace, run_id: str) -> int:
    """How many edits the run shows that were carried (or applied by hand) from an earlier run."""
    return sum(1 for edit in edits.active_edits(workspace.edits.of(run_id)) if edit.carried_from)


def concept_name(run: LoadedRun, level: str, concept: int) -> str:
    """A concept of the run named as pickers name it ("Theme 3: stars · galaxies")."""
    if level == "theme":
        labels = run.theme_info.set_index("theme_id")["label"]
    elif level == "subtheme":
        labels = run.subtheme_info.set_index("subtheme_id")["label"]
    elif level == "family":
        labels = {family.family_id: family.label for family in run.families}
    else:
        labels = run.features.set_index("feature_id")["label"]
    return unit_name(level, concept, labels.get(concept, ""))


def sentence(notice: EditNotice, run: LoadedRun) -> str:
    """The notice in words, e.g. "Your edit “theme 3 renamed “Astrophysics”” no longer shows: the themes were
    regrouped since, and no theme holds enough of its features. It fits Theme 5: stars · galaxies best."."""
    what = edits.describe(notice.edit)
    if notice.reason == REGROUPED:
        why = f"the {level_word(notice.edit.level)}s were regrouped since, and none holds enough of its features"
    else:
        why = f"it was made on an earlier run ({notice.edit.run_id}) and this training has no clear match for it"
    fit = ""
    if notice.targets:
        fits = " + ".join(concept_name(run, _target_level(notice.edit), t) for t in notice.targets)
        fit = f" It fits {fits} best."
    return f"Your edit “{what}” does not show: {why}.{fit}"


def _target_level(edit: EditRecord) -> str:
    return "theme" if edit.action == "merge" else edit.level


def reapply(workspace: Workspace, run: LoadedRun, notice: EditNotice, targets: Sequence[int] = ()) -> EditRecord:
    """Makes the edit again on `targets` (default: the concepts it fits best); this run's own edit that no longer
    applied is undone, replaced by the new one."""
    chosen = [int(t) for t in (targets or notice.targets)]
    if notice.reason == REGROUPED:
        made = carry.redo(workspace, run, notice.edit, chosen, "")
        edits.undo(workspace, run.record.run_id, notice.edit.edit_id)
        return made
    return carry.redo(workspace, run, notice.edit, chosen, notice.origin)


def dismiss(workspace: Workspace, run: LoadedRun, notice: EditNotice) -> EditRecord:
    """The notice is not wanted: the run's own edit is undone; an earlier run's is recorded as dismissed here."""
    if notice.reason == REGROUPED:
        return edits.undo(workspace, run.record.run_id, notice.edit.edit_id)
    return edits.dismiss(workspace, run.record.run_id, notice.edit)
