"""Edits that do not show are announced, with one click to make them again where they fit or to dismiss them
(prisma_core/carryover/edit_notices.py): after the themes are regrouped, after a new training, and `carry` run twice
says what it did; on the small real run."""

from __future__ import annotations

import dataclasses

import pytest
from small_run import SMALL_SAE, SmallRun

from prisma_core import pipeline
from prisma_core.carryover import carry
from prisma_core.carryover.edit_notices import NOT_CARRIED, REGROUPED, dismiss, edit_notices, reapply, sentence
from prisma_core.curation import edits
from prisma_core.curation.applied_edits import jaccard
from prisma_core.reading.runs import load_run
from prisma_core.store import EditRecord


def test_a_renamed_theme_lost_in_a_regroup_is_announced_and_made_again_in_one_click(small_run: SmallRun, tmp_path):
    workspace = small_run.copy(tmp_path / "ws")
    run = load_run(workspace)
    theme = int(run.theme_info["theme_id"].iloc[0])
    renamed = edits.rename(workspace, run, "theme", theme, "Astrophysics")
    pinned = edits.pin(workspace, run, "theme", int(run.theme_info["theme_id"].iloc[1]))
    pipeline.rebuild_themes(workspace, run.record.run_id, dataclasses.replace(run.settings.themes, n_themes=2))
    regrouped = load_run(workspace)
    assert {e.edit_id for e in regrouped.edited.not_applied} >= {renamed.edit_id}
    assert "Astrophysics" not in regrouped.theme_info["label"].tolist()

    notices = {n.edit.edit_id: n for n in edit_notices(workspace, regrouped)}
    notice = notices[renamed.edit_id]
    assert notice.reason == REGROUPED and len(notice.targets) == 1
    fits = notice.targets[0]
    members = renamed.value["members"]
    info = regrouped.theme_info
    fit = {int(t): jaccard(fs, members) for t, fs in zip(info["theme_id"], info["features"], strict=True)}
    assert fit[fits] == max(fit.values()) > 0  # the theme sharing the most of its features
    words = sentence(notice, regrouped)
    assert "theme 0 renamed “Astrophysics”" in words.replace(f"theme {theme}", "theme 0") and "regrouped" in words
    assert f"Theme {fits}: " in words

    made = reapply(workspace, regrouped, notice)
    again = load_run(workspace)
    assert again.theme_info.set_index("theme_id").at[fits, "label"] == "Astrophysics"
    assert made in again.edited.applied and renamed.edit_id not in {
        e.edit_id for e in edits.active_edits(workspace.edits.of(run.record.run_id))
    }
    left = {n.edit.edit_id for n in edit_notices(workspace, again)}
    assert renamed.edit_id not in left
    if pinned.edit_id in left:  # the pin lost in the regroup too: dismissed, it is undone and no longer announced
        dismiss(workspace, again, next(n for n in edit_notices(workspace, again) if n.edit.edit_id == pinned.edit_id))
        assert edit_notices(workspace, load_run(workspace)) == []


@pytest.fixture(scope="module")
def retrained(small_run: SmallRun, tmp_path_factory):
    """The small run trained again with another seed, then edited on the earlier run: edits the new training never
    carried."""
    workspace = small_run.copy(tmp_path_factory.mktemp("notices") / "ws")
    first = load_run(workspace)
    summary = pipeline.train_run(workspace, first.record.dataset_id, dataclasses.replace(SMALL_SAE, seed=1))
    assert summary.carried is None  # nothing was edited yet
    features = first.features[first.features["density"] > 0].sort_values("density", ascending=False)
    made = [
        edits.rename(workspace, first, "theme", int(first.theme_info["theme_id"].iloc[0]), "Politics"),
        edits.pin(workspace, first, "feature", int(features["feature_id"].iloc[0])),
    ]
    return workspace, first.record.run_id, summary.run_id, made


def test_edits_a_new_training_did_not_carry_are_announced_on_it_and_applied_or_dismissed(retrained):
    workspace, first, second, (renamed, pinned) = retrained
    run = load_run(workspace, second)
    notices = {n.edit.edit_id: n for n in edit_notices(workspace, run)}
    assert set(notices) == {renamed.edit_id, pinned.edit_id}
    assert all(n.reason == NOT_CARRIED for n in notices.values())
    matching = carry.match_runs(
        load_run(workspace, first, with_edits=False), load_run(workspace, second, with_edits=False)
    )
    assert notices[renamed.edit_id].targets == (matching.pairs("theme")[renamed.target][0],)
    assert f"earlier run ({first})" in sentence(notices[renamed.edit_id], run)

    made = reapply(workspace, run, notices[renamed.edit_id])
    assert made.carried_from == f"{first}/{renamed.edit_id}"
    shown = load_run(workspace, second)
    assert "Politics" in shown.theme_info["label"].tolist()
    dismissed = dismiss(workspace, shown, notices[pinned.edit_id])
    assert dismissed.action == edits.DISMISS and dismissed not in edits.active_edits(workspace.edits.of(second))
    assert edit_notices(workspace, load_run(workspace, second)) == []
    assert not load_run(workspace, second).features["pinned"].any()  # dismissed: not made here

    report = carry.carry_edits(workspace, first, second)  # both were handled: nothing is carried again
    assert report.carried == [] and report.not_carried == [] and len(report.before) == 2
    assert report.summary() == [f"Nothing new to carry: all 2 edits of run {first} carried before."]


def test_what_was_carried_before_is_said_in_words():
    def edit(edit_id: str) -> EditRecord:
        return EditRecord(edit_id, "run-a", "2026", "me", "pin", "theme", 1, {"members": [1]}, "", "")

    assert carry.CarryReport("run-a", "run-b", before=[edit("e1")]).summary() == [
        "Nothing new to carry: 1 edit of run run-a carried before."
    ]
    report = carry.CarryReport("run-a", "run-b", carried=[(edit("e2"), edit("e3"))], before=[edit("e1")])
    assert report.summary() == ["1 of 1 edits carried over (1 carried before)"]
