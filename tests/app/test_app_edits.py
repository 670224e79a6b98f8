"""Features page, *Your edits*: rename a theme, hide a feature, see both on the page, and undo them."""

from dataclasses import replace

from app_helpers import features_table, new_app, open_page, texts

from prisma_core import pipeline
from prisma_core.curation import edits
from prisma_core.curation.applied_edits import jaccard
from ui.edits import PANEL_KEY, PANEL_TITLE

pytest_plugins = ["app_fixtures"]  # the shared trained workspace


def test_a_renamed_theme_and_a_hidden_feature_show_on_the_page_until_undone(trained_app):
    at = open_page(new_app(trained_app.dataset_id, trained_app.run_id), "features")
    run = pipeline.load_run(trained_app.workspace, trained_app.run_id)
    theme = int(run.theme_info["theme_id"].iloc[0])
    at.radio(key="edit_level").set_value("theme").run()
    at.selectbox(key="edit_target").select(theme).run()
    at.radio(key="edit_action").set_value("rename").run()
    at.text_input(key="edit_name").input("My <i>theme</i>")
    at.button(key="FormSubmitter:edit_form-Save the change").click().run()
    assert not at.exception
    assert (
        "My <i>theme</i>" in pipeline.load_run(trained_app.workspace, trained_app.run_id).theme_info["label"].tolist()
    )
    assert any("renamed “My \\<i\\>theme\\</i\\>”" in text or "My <i>theme</i>" in text for text in texts(at.markdown))
    assert at.session_state[PANEL_KEY] is True  # the panel stays open after the edit (it folded shut before)
    assert [e.label for e in at.expander if e.label.startswith("Your edits")] == [PANEL_TITLE]

    feature = int(features_table(at)["feature_id"].iloc[0])
    at.radio(key="edit_level").set_value("feature").run()
    at.selectbox(key="edit_target").select(feature).run()
    at.radio(key="edit_action").set_value("hide").run()
    at.button(key="FormSubmitter:edit_form-Save the change").click().run()
    assert not at.exception
    assert feature not in features_table(at)["feature_id"].tolist()

    for record in reversed(edits.active_edits(trained_app.workspace.edits.of(trained_app.run_id))):
        at.button(key=f"undo_{record.edit_id}").click().run()
        assert not at.exception
    assert edits.active_edits(trained_app.workspace.edits.of(trained_app.run_id)) == []
    assert feature in features_table(at)["feature_id"].tolist()
    assert (
        "My <i>theme</i>"
        not in pipeline.load_run(trained_app.workspace, trained_app.run_id).theme_info["label"].tolist()
    )


def test_a_sub_theme_can_be_renamed_or_pinned_on_the_page_but_not_hidden_alone(trained_app):
    at = open_page(new_app(trained_app.dataset_id, trained_app.run_id), "features")
    run = pipeline.load_run(trained_app.workspace, trained_app.run_id)
    subtheme = int(run.subtheme_info["subtheme_id"].iloc[0])
    at.radio(key="edit_level").set_value("subtheme").run()
    first = f"Sub-theme {subtheme}: {run.subtheme_info['label'].iloc[0]}"
    assert at.selectbox(key="edit_target").options[0] == first  # a picker shows text as it is: no backslashes
    assert at.radio(key="edit_action").options == ["Rename", "Pin to the top"]
    at.selectbox(key="edit_target").select(subtheme).run()
    at.radio(key="edit_action").set_value("rename").run()
    at.text_input(key="edit_name").input("My desk")
    at.button(key="FormSubmitter:edit_form-Save the change").click().run()
    assert not at.exception
    shown = pipeline.load_run(trained_app.workspace, trained_app.run_id).subtheme_info.set_index("subtheme_id")
    assert shown.at[subtheme, "label"] == "My desk"
    assert any(f"sub-theme {subtheme} renamed “My desk”" in text for text in texts(at.markdown))
    (record,) = edits.active_edits(trained_app.workspace.edits.of(trained_app.run_id))
    at.button(key=f"undo_{record.edit_id}").click().run()
    assert pipeline.load_run(trained_app.workspace, trained_app.run_id).subtheme_info["label"].iloc[0] != "My desk"


def test_a_theme_is_split_into_its_sub_themes_on_the_page(trained_app):
    at = open_page(new_app(trained_app.dataset_id, trained_app.run_id), "features")
    run = pipeline.load_run(trained_app.workspace, trained_app.run_id)
    sizes = run.subtheme_info["theme_id"].value_counts()
    theme = int(sizes[sizes >= 2].index[0])
    at.radio(key="edit_level").set_value("theme").run()
    at.selectbox(key="edit_target").select(theme).run()
    at.radio(key="edit_action").set_value("split").run()
    at.button(key="FormSubmitter:edit_form-Save the change").click().run()
    assert not at.exception
    split = pipeline.load_run(trained_app.workspace, trained_app.run_id)
    assert theme not in split.theme_info["theme_id"].tolist()
    assert len(split.theme_info) == len(run.theme_info) - 1 + sizes[theme]
    assert any(f"theme {theme} split into its {sizes[theme]} sub-themes" in text for text in texts(at.markdown))
    (record,) = edits.active_edits(trained_app.workspace.edits.of(trained_app.run_id))
    at.button(key=f"undo_{record.edit_id}").click().run()
    assert theme in pipeline.load_run(trained_app.workspace, trained_app.run_id).theme_info["theme_id"].tolist()


def test_an_edit_lost_in_a_regroup_is_announced_on_home_and_made_again_in_one_click(trained_app):
    """An edit whose theme no longer holds the features it was made on (as after a regroup): Home says so, names
    the theme it fits best, and one click renames that theme; the notice is gone."""
    workspace, run_id = trained_app.workspace, trained_app.run_id
    run = pipeline.load_run(workspace, run_id)
    members = run.theme_info.set_index("theme_id")["features"]
    theme = int(members.map(len).idxmin())
    made_on = sorted({int(f) for fs in members for f in fs})  # every theme's: the smallest holds under half of them
    fits = max(members.index, key=lambda t: jaccard(members[t], made_on))
    record = edits.rename(workspace, run, "theme", theme, "Astrophysics")
    lost = replace(record, edit_id="edit-lost-in-regroup", value=record.value | {"members": made_on})
    edits.undo(workspace, run_id, record.edit_id)
    workspace.edits.add([lost])
    try:
        at = open_page(new_app(trained_app.dataset_id, run_id), "home")
        assert not at.exception
        (notice,) = [text for text in texts(at.warning) if "Astrophysics" in text]
        assert "does not show: the themes were regrouped since" in notice
        (apply,) = [b for b in at.button if b.key == f"home_apply_{lost.edit_id}"]
        assert apply.label.startswith(f"Apply it to Theme {fits}: ")  # the theme holding most of its features
        apply.click().run()
        assert not at.exception
        shown = pipeline.load_run(workspace, run_id)
        assert shown.theme_info.set_index("theme_id").at[fits, "label"] == "Astrophysics"
        assert not [text for text in texts(at.warning) if "Astrophysics" in text]
        features = open_page(at, "features")  # the concept's page shows no notice either
        assert not [text for text in texts(features.warning) if "Astrophysics" in text]
    finally:
        for active in edits.active_edits(workspace.edits.of(run_id)):
            edits.undo(workspace, run_id, active.edit_id)


def test_a_notice_is_dismissed_in_one_click(trained_app):
    workspace, run_id = trained_app.workspace, trained_app.run_id
    run = pipeline.load_run(workspace, run_id)
    record = edits.pin(workspace, run, "theme", int(run.theme_info["theme_id"].iloc[-1]))
    lost = replace(record, edit_id="edit-pin-lost", value={"members": [-5, -6]})  # no theme holds these now
    edits.undo(workspace, run_id, record.edit_id)
    workspace.edits.add([lost])
    at = open_page(new_app(trained_app.dataset_id, run_id), "features")
    assert len([text for text in texts(at.warning) if "pinned to the top" in text]) == 1
    at.button(key=f"features_dismiss_{lost.edit_id}").click().run()
    assert not at.exception
    assert not [text for text in texts(at.warning) if "pinned to the top" in text]
    assert edits.active_edits(workspace.edits.of(run_id)) == []  # dismissed: undone, still recorded


def test_every_theme_merged_into_one_still_shows_the_features_page(trained_app):
    """Merging every theme into one left the regroup box below its smallest number (2): the page failed."""
    workspace, run_id = trained_app.workspace, trained_app.run_id
    run = pipeline.load_run(workspace, run_id)
    first, *others = (int(t) for t in run.theme_info["theme_id"])
    merged = edits.merge_themes(workspace, run, first, others)
    try:
        at = open_page(new_app(trained_app.dataset_id, run_id), "features")
        assert not at.exception and not texts(at.error)
        assert at.number_input(key="n_themes").value == 2
        assert any(text.startswith("1 theme;") or text.startswith("1 theme,") for text in texts(at.caption))
    finally:
        edits.undo(workspace, run_id, merged.edit_id)
