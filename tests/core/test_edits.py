"""The analyst's edits (prisma_core/curation/edits.py): stored, shown by the read model, undone, and carried to a run
trained again (prisma_core/carryover/carry.py), on the small real run."""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pandas as pd
import pytest
from small_run import SMALL_SAE, SmallRun

from prisma_core import pipeline
from prisma_core.carryover import carry
from prisma_core.cli import main
from prisma_core.curation import edits
from prisma_core.errors import SettingsError
from prisma_core.reading.explore import level_units, search_features
from prisma_core.reading.overview import families_of_themes
from prisma_core.reading.runs import LoadedRun, load_run
from prisma_core.store import EditRecord, NamedFamily, Workspace
from prisma_core.store.schemas import MANUAL_SOURCE


@pytest.fixture(scope="module")
def edited(small_run: SmallRun, tmp_path_factory: pytest.TempPathFactory) -> tuple[Workspace, str, dict]:
    """A copy of the small run with one edit of each kind."""
    workspace = small_run.copy(tmp_path_factory.mktemp("edits") / "ws")
    run = load_run(workspace)
    feature = int(run.features.sort_values("density", ascending=False)["feature_id"].iloc[0])
    hidden_feature = int(run.features.sort_values("density", ascending=False)["feature_id"].iloc[1])
    family = shown_family(run, hidden_feature)
    sizes = run.theme_info.set_index("theme_id")["n_documents"]
    subtheme = int(run.subtheme_info.loc[run.subtheme_info["theme_id"] == 0, "subtheme_id"].iloc[0])
    made = {
        "rename_theme": edits.rename(workspace, run, "theme", 0, "My <b>politics</b>", "what I call it"),
        "merge": edits.merge_themes(workspace, run, 1, [2]),
        "hide_theme": edits.hide(workspace, run, "theme", 3),
        "pin": edits.pin(workspace, run, "theme", 4),
        "rename_family": edits.rename(workspace, run, "family", family.family_id, "My family"),
        "rename_feature": edits.rename(workspace, run, "feature", feature, "My feature"),
        "hide_feature": edits.hide(workspace, run, "feature", hidden_feature),
        "rename_subtheme": edits.rename(workspace, run, "subtheme", subtheme, "My sub-theme"),
    }
    facts = {
        "family": family.family_id,
        "feature": feature,
        "hidden_feature": hidden_feature,
        "sizes": sizes,
        "subtheme": subtheme,
    }
    return workspace, run.record.run_id, made | facts


def shown_family(run: LoadedRun, hidden_feature: int) -> NamedFamily:
    """The largest family of theme 0, or else of theme 4 (themes the edits below rename or pin, never merge away or
    hide), without the feature they hide: the family stays listed with its theme wherever themes list their families
    (the report does)."""
    grouped = families_of_themes(run)
    kept = [family for theme in (0, 4) for family in grouped.get(theme, []) if hidden_feature not in family.members]
    assert kept, "the small run has a family in theme 0 or 4"
    return kept[0]


def _check_edits_shown(workspace: Workspace, run_id: str, facts: dict) -> None:
    run = load_run(workspace, run_id)
    info = run.theme_info.set_index("theme_id")
    assert run.theme_info["theme_id"].tolist()[0] == 4  # pinned first
    assert info.at[0, "label"] == "My <b>politics</b>" and info.at[0, "label_source"] == MANUAL_SOURCE
    assert info.at[0, "description"] == "what I call it"
    assert 2 not in info.index and 3 not in info.index  # merged away, hidden
    assert info.at[1, "n_documents"] >= facts["sizes"][1] + facts["sizes"][2] - 1  # documents of both (a few in both)
    strongest = run.themes.strongest()
    assert not np.isin(strongest, [2, 3]).any()
    assert (strongest >= 0).sum() == (load_run(workspace, run_id, with_edits=False).themes.strongest() >= 0).sum()
    assert {f.family_id: f.label for f in run.families}[facts["family"]] == "My family"
    for family in run.families:  # a hidden feature leaves its family; its children hang from the member above it
        assert facts["hidden_feature"] not in family.members
        assert {c for _, c, _ in family.edges} == set(family.members) - {family.parent}
        assert {p for p, _, _ in family.edges} <= set(family.members)
    features = run.features.set_index("feature_id")
    assert features.at[facts["feature"], "label"] == "My feature"
    assert features.at[facts["feature"], "label_source"] == MANUAL_SOURCE
    assert features.at[facts["hidden_feature"], "hidden"] and features.at[facts["hidden_feature"], "theme_id"] == -1
    assert facts["hidden_feature"] not in search_features(run, "")["feature_id"].tolist()
    codes, units = level_units(run, "feature")
    assert codes.shape[1] == len(units) == len(run.features) - 1
    theme_codes, theme_units = level_units(run, "theme")
    assert theme_codes.shape[1] == len(theme_units) == 3
    assert len(run.edited.applied) == 8 and run.edited.not_applied == ()
    assert run.subtheme_info.set_index("subtheme_id").at[facts["subtheme"], "label"] == "My sub-theme"
    _check_subthemes_follow_their_themes(run, load_run(workspace, run_id, with_edits=False))


def _check_subthemes_follow_their_themes(run, trained) -> None:
    """Theme 2 merged into theme 1, theme 3 hidden: the sub-themes of 2 are in 1, those of 3 are hidden with it."""
    before = trained.subtheme_info.set_index("subtheme_id")["theme_id"]
    after = run.subtheme_info.set_index("subtheme_id")["theme_id"]
    assert set(after.index) == set(before.index[before != 3])
    assert set(after.index[after == 1]) == set(before.index[before.isin([1, 2])])
    assert not after.isin([2, 3]).any()
    of_hidden = np.isin(trained.subthemes.assignment, before.index[before == 3])
    assert of_hidden.any() and (run.subthemes.assignment[of_hidden] == -1).all()
    np.testing.assert_array_equal(run.subthemes.assignment[~of_hidden], trained.subthemes.assignment[~of_hidden])
    members, units = level_units(run, "subtheme")
    assert members.shape[1] == len(units) == len(run.subtheme_info)
    assert (np.asarray(members.sum(axis=0)).ravel() == run.subtheme_info["n_documents"].to_numpy()).all()


def test_every_kind_of_edit_is_shown_after_a_reload_and_in_another_session(edited):
    workspace, run_id, facts = edited
    _check_edits_shown(workspace, run_id, facts)
    _check_edits_shown(Workspace(workspace.uri), run_id, facts)  # another session: a new connection
    records = Workspace(workspace.uri).edits.of(run_id)
    assert [r.action for r in records] == ["rename", "merge", "hide", "pin", "rename", "rename", "hide", "rename"]
    assert all(r.author and r.created_at for r in records)


def test_hidden_concepts_leave_the_export_but_stay_stored(edited, tmp_path):
    workspace, run_id, facts = edited
    pipeline.export_run(workspace, run_id, tmp_path / "out")
    exported = pd.read_parquet(tmp_path / "out" / "features.parquet")
    activations = pd.read_parquet(tmp_path / "out" / "activations.parquet")
    assert facts["hidden_feature"] not in exported["feature_id"].tolist()
    assert facts["hidden_feature"] not in activations["feature_id"].unique()
    assert exported.set_index("feature_id").at[facts["feature"], "label"] == "My feature"
    themes = pd.read_json(tmp_path / "out" / "themes.json")
    assert themes["theme_id"].tolist()[0] == 4 and 3 not in themes["theme_id"].tolist()
    assert len(workspace.feature_stats.of(run_id)) == len(load_run(workspace, run_id).features)  # nothing deleted


def test_undo_shows_a_hidden_concept_again_and_gives_a_name_back(small_run: SmallRun, tmp_path):
    workspace = small_run.copy(tmp_path / "ws")
    run = load_run(workspace)
    run_id, before = run.record.run_id, run.features.set_index("feature_id")["label"]
    hidden = edits.hide(workspace, run, "theme", 0)
    renamed = edits.rename(workspace, load_run(workspace), "feature", 2, "Mine")
    assert 0 not in load_run(workspace).theme_info["theme_id"].tolist()
    edits.undo(workspace, run_id, hidden.edit_id)
    edits.undo(workspace, run_id, renamed.edit_id)
    after = load_run(workspace)
    assert 0 in after.theme_info["theme_id"].tolist()
    assert after.features.set_index("feature_id").at[2, "label"] == before[2]
    assert (after.themes.probabilities == load_run(workspace, with_edits=False).themes.probabilities).all()
    with pytest.raises(SettingsError, match="undone already"):
        edits.undo(workspace, run_id, hidden.edit_id)
    assert len(workspace.edits.of(run_id)) == 4  # every edit and undo stays recorded


def test_edits_of_a_missing_concept_are_refused(small_run: SmallRun):
    run = load_run(Workspace(small_run.path))
    with pytest.raises(SettingsError, match="no theme 99"):
        edits.members_of(run, "theme", 99)
    with pytest.raises(SettingsError, match="no sub-theme 999"):
        edits.members_of(run, "subtheme", 999)
    without_subthemes = dataclasses.replace(run, subtheme_info=run.subtheme_info.iloc[:0])  # a run made before them
    with pytest.raises(SettingsError, match="This run has no sub-themes"):
        edits.members_of(without_subthemes, "subtheme", 0)


def test_a_sub_theme_is_renamed_and_pinned_everywhere_but_only_hidden_with_its_theme(
    small_run: SmallRun, tmp_path, capsys
):
    workspace = small_run.copy(tmp_path / "ws")
    run = load_run(workspace)
    assert len(run.subtheme_info) >= 2
    first, last = (int(s) for s in run.subtheme_info["subtheme_id"].iloc[[0, -1]])
    where = ["--workspace", str(workspace.path), "--level", "subtheme"]
    renamed = ["--action", "rename", "--id", str(first), "--name", "My <i>desk</i>", "--description", "mine"]
    assert main(["edit", *where, *renamed]) == 0
    assert f"sub-theme {first} renamed “My <i>desk</i>”" in capsys.readouterr().out
    edits.pin(workspace, load_run(workspace), "subtheme", last)
    with pytest.raises(SettingsError, match="cannot be hidden on its own"):
        edits.hide(workspace, run, "subtheme", first)

    shown = load_run(workspace)
    info = shown.subtheme_info.set_index("subtheme_id")
    assert (info.at[first, "label"], info.at[first, "label_source"]) == ("My <i>desk</i>", MANUAL_SOURCE)
    assert info.at[first, "description"] == "mine" and info.at[last, "pinned"]
    assert shown.subtheme_info["subtheme_id"].iloc[0] == last  # pinned first
    members, units = level_units(shown, "subtheme")  # queries and comparisons read the pinned one first too
    assert units["unit"].iloc[0] == last
    np.testing.assert_array_equal(members[:, 0].toarray().ravel() > 0, shown.subthemes.assignment == last)
    assert len(shown.edited.applied) == 2
    pipeline.export_run(workspace, None, tmp_path / "out")
    exported = [sub for theme in pd.read_json(tmp_path / "out" / "themes.json")["subthemes"] for sub in theme]
    assert {sub["subtheme_id"]: sub["label"] for sub in exported}[first] == "My <i>desk</i>"
    trained = load_run(workspace, with_edits=False).subtheme_info.set_index("subtheme_id")
    assert trained.at[first, "label"] != "My <i>desk</i>"  # the run as trained is untouched


def test_a_run_matched_with_itself_keeps_every_concept(small_run: SmallRun):
    run = load_run(Workspace(small_run.path), with_edits=False)
    matching = carry.match_runs(run, run)
    firing = run.features.loc[run.features["density"] > 0, "feature_id"].tolist()
    assert matching.clear("feature") == {f: f for f in firing}
    assert matching.clear("theme") == {t: t for t in run.theme_info["theme_id"]}
    assert matching.clear("family") == {f.family_id: f.family_id for f in run.families}
    assert matching.clear("subtheme") == {s: s for s in run.subtheme_info["subtheme_id"]}
    table = carry.compare_runs(run, run, matching)
    assert set(table["status"]) == {"kept"}


def test_edits_are_carried_to_a_run_trained_again_with_another_seed(edited, tmp_path):
    source, run_id, _ = edited
    workspace = Workspace(tmp_path / "ws")
    shutil.copytree(source.path, workspace.path, dirs_exist_ok=True)
    dataset_id = load_run(workspace, run_id).record.dataset_id
    summary = pipeline.train_run(workspace, dataset_id, dataclasses.replace(SMALL_SAE, seed=1))
    report = summary.carried
    assert report is not None and report.from_run == run_id and report.to_run == summary.run_id
    assert len(report.carried) + len(report.not_carried) == 8
    old = load_run(workspace, run_id, with_edits=False)
    new = load_run(workspace, summary.run_id, with_edits=False)
    matching = carry.match_runs(old, new)
    shown = load_run(workspace, summary.run_id)
    for before, after in report.carried:
        assert after.carried_from == f"{run_id}/{before.edit_id}" and after.run_id == summary.run_id
        assert after.target == matching.clear(before.level)[before.target]
    renamed = {e.value["name"] for e, _ in report.carried if e.action == "rename"}
    names = set(shown.theme_info["label"]) | {f.label for f in shown.families} | set(shown.features["label"])
    names |= set(shown.subtheme_info["label"])
    assert renamed <= names
    theme_edits = [e for e, _ in report.carried if e.level == "theme"]
    assert theme_edits, "the themes of the small run come back with another seed"
    assert report.summary()[0] == f"{len(report.carried)} of 8 edits carried over"
    assert all("no clear match" in line or "was not carried" in line for line in report.summary()[1:])
    again = carry.carry_edits(workspace, run_id, summary.run_id)
    assert again.carried == [] and len(again.not_carried) == len(report.not_carried)  # never carried twice
    assert len(again.before) == len(report.carried)  # said as carried before, not as "0 of 8 carried"
    tried = len(again.not_carried)
    assert again.summary()[0] == (
        f"0 of {tried} edits carried over ({len(again.before)} carried before)"
        if tried
        else f"Nothing new to carry: all {len(again.before)} edits of run {run_id} carried before."
    )
    counts = carry.counts(carry.compare_runs(old, new, matching))
    assert counts.loc["theme", "kept"] >= 3
    assert counts.loc["feature"].sum() >= len(old.features[old.features["density"] > 0])


def test_edits_survive_an_added_batch_of_documents(edited, bbc: pd.DataFrame, tmp_path):
    source, run_id, facts = edited
    workspace = Workspace(tmp_path / "ws")
    shutil.copytree(source.path, workspace.path, dirs_exist_ok=True)
    dataset_id = load_run(workspace, run_id).record.dataset_id
    more = tmp_path / "more.parquet"
    bbc.groupby("label").nth([20, 21, 22, 23]).to_parquet(more)
    added, (placed,) = pipeline.grow_dataset(workspace, dataset_id, [more])
    assert added.n_added == placed.n_added == 20
    _check_edits_shown(workspace, run_id, facts)  # every edit still applies, to 80 documents now
    _check_edits_shown(Workspace(workspace.uri), run_id, facts)
    run = load_run(workspace, run_id)
    assert run.codes.shape[0] == 80 and run.edited.not_applied == ()
    again = pipeline.train_run(workspace, dataset_id, dataclasses.replace(SMALL_SAE, seed=1))  # on the grown dataset
    assert again.carried is not None and again.carried.from_run == run_id
    assert any(edit.level == "theme" for edit, _ in again.carried.carried)
    assert load_run(workspace, again.run_id).codes.shape[0] == 80


def test_the_command_line_makes_lists_and_undoes_edits(small_run: SmallRun, tmp_path, capsys):
    workspace = small_run.copy(tmp_path / "ws")
    where = ["--workspace", str(workspace.path)]
    assert main(["edit", *where, "--action", "rename", "--level", "theme", "--id", "1", "--name", "Money"]) == 0
    assert "theme 1 renamed “Money”" in capsys.readouterr().out
    assert main(["edit", *where, "--action", "pin", "--level", "feature", "--id", "3"]) == 0
    capsys.readouterr()
    assert main(["edit", *where]) == 0
    listed = capsys.readouterr().out
    assert "theme 1 renamed “Money”  [shown]" in listed and "feature 3 pinned to the top  [shown]" in listed
    edit_id = workspace.edits.of(load_run(workspace).record.run_id)[0].edit_id
    assert main(["edit", *where, "--action", "undo", "--edit-id", edit_id]) == 0
    assert load_run(workspace).theme_info.set_index("theme_id").at[1, "label"] != "Money"
    assert main(["edit", *where, "--action", "hide", "--level", "theme"]) == 2
    assert "--id is needed" in capsys.readouterr().err


def test_the_report_shows_the_edited_names_escaped(edited, tmp_path):
    from prisma_core.pipeline.report.config import ReportConfig
    from prisma_core.pipeline.report.writer import write_report

    workspace, run_id, _ = edited
    path = write_report(workspace, load_run(workspace, run_id), tmp_path / "report.html", ReportConfig(predict=False))
    text = path.read_text()
    assert "My &lt;b&gt;politics&lt;/b&gt;" in text and "<b>politics</b>" not in text
    assert "My family" in text


def test_what_was_not_carried_is_said_in_words():
    def edit(action: str, level: str, target: int, name: str = "") -> EditRecord:
        value = {"name": name, "members": [target]} if name else {"members": [target]}
        return EditRecord(f"edit-{target}", "run-a", "2026", "me", action, level, target, value, "", "")

    report = carry.CarryReport(
        "run-a",
        "run-b",
        carried=[(edit("pin", "theme", 1), edit("pin", "theme", 2))],
        not_carried=[
            (edit("rename", "theme", 3, "Politics"), carry.NO_MATCH),
            (edit("rename", "theme", 4, "Sport"), carry.NO_MATCH),
            (edit("hide", "family", 5), carry.NO_MATCH),
            (edit("pin", "subtheme", 7), carry.NO_MATCH),
            (edit("rename", "feature", 6, "Tax"), "This run shows no feature 9."),
        ],
    )
    assert report.summary() == [
        "1 of 6 edits carried over",
        "feature 6 renamed “Tax” was not carried: This run shows no feature 9.",
        "2 renamed themes have no clear match: “Politics”, “Sport”",
        "1 hidden family has no clear match: family 5",
        "1 pinned sub-theme has no clear match: sub-theme 7",
    ]


def test_a_theme_split_into_its_sub_themes_moves_only_its_own_documents_until_undone(
    small_run: SmallRun, tmp_path, capsys
):
    workspace = small_run.copy(tmp_path / "ws")
    trained = load_run(workspace)
    per_theme = trained.subtheme_info.groupby("theme_id")["subtheme_id"].apply(list)
    theme = int(next(t for t, subs in per_theme.items() if len(subs) >= 2))
    subs = trained.subtheme_info[trained.subtheme_info["theme_id"] == theme]
    where = ["--workspace", str(workspace.path)]
    assert main(["edit", *where, "--action", "split", "--id", str(theme)]) == 0
    assert f"theme {theme} split into its {len(subs)} sub-themes" in capsys.readouterr().out
    assert main(["edit", *where, "--action", "split", "--level", "family", "--id", "0"]) == 2
    assert "Only themes are split" in capsys.readouterr().err

    run = load_run(workspace)
    new_theme = run.subtheme_info.set_index("subtheme_id")["theme_id"]
    info = run.theme_info.set_index("theme_id")
    assert theme not in info.index and len(info) == len(trained.theme_info) - 1 + len(subs)
    for sub in subs.itertuples():  # each sub-theme is a theme now, named as it, with its documents
        became = int(new_theme[sub.subtheme_id])
        assert became >= trained.themes.n_themes and info.at[became, "label"] == sub.label
    before, after = trained.themes.strongest(), run.themes.strongest()
    in_theme = before == theme
    np.testing.assert_array_equal(after[~in_theme], before[~in_theme])  # no other document moves
    own = trained.subthemes.assignment[in_theme]
    np.testing.assert_array_equal(after[in_theme], new_theme.reindex(own).to_numpy())
    totals = run.themes.probabilities.sum(axis=1), trained.themes.probabilities.sum(axis=1)
    np.testing.assert_allclose(*totals, rtol=1e-6)
    np.testing.assert_array_equal(run.themes.fits(), trained.themes.fits())
    was_in_theme = trained.features["theme_id"].to_numpy() == theme
    assert set(run.features["theme_id"].to_numpy()[was_in_theme]) <= set(new_theme[subs["subtheme_id"]])
    members, units = level_units(run, "theme")
    assert members.shape[1] == len(units) == len(info)
    assert (np.asarray(members.sum(axis=0)).ravel() == run.theme_info["n_documents"].to_numpy()).all()
    pipeline.export_run(workspace, None, tmp_path / "out")
    exported = pd.read_json(tmp_path / "out" / "themes.json").set_index("theme_id")
    assert all(exported.at[int(new_theme[s]), "subthemes"][0]["subtheme_id"] == s for s in subs["subtheme_id"])

    (split,) = edits.active_edits(workspace.edits.of(trained.record.run_id))
    again = pipeline.train_run(workspace, trained.record.dataset_id, dataclasses.replace(SMALL_SAE, seed=1))
    carried = {before.edit_id: after for before, after in again.carried.carried}
    assert split.edit_id in carried or [e.edit_id for e, _ in again.carried.not_carried] == [split.edit_id]
    if split.edit_id in carried:  # the matching theme of the new run is split into its own sub-themes
        target = carried[split.edit_id].target
        shown = load_run(workspace, again.run_id)
        assert target not in shown.theme_info["theme_id"].tolist() and shown.edited.not_applied == ()
        assert set(shown.subtheme_info["theme_id"]) <= set(shown.theme_info["theme_id"])
    edits.undo(workspace, trained.record.run_id, split.edit_id)
    restored = load_run(workspace, trained.record.run_id)
    assert restored.theme_info["theme_id"].tolist() == trained.theme_info["theme_id"].tolist()
    np.testing.assert_array_equal(restored.themes.probabilities, trained.themes.probabilities)


def test_a_theme_without_sub_themes_to_split_into_is_refused(small_run: SmallRun):
    run = load_run(Workspace(small_run.path))
    without_subthemes = dataclasses.replace(run, subtheme_info=run.subtheme_info.iloc[:0])
    with pytest.raises(SettingsError, match="no sub-themes: there is nothing to split it into"):
        edits.split_theme(Workspace(small_run.path), without_subthemes, int(run.theme_info["theme_id"].iloc[0]))
