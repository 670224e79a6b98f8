"""Every view is current after another process changes what it shows (issue 26: after `themes --n-themes 5` on the
command line the app kept showing the old 7 themes, in a new session too): themes, labels and families changed by
the command line show in a session that was already open and in a new one."""

from app_helpers import new_app, open_page, table, texts
from ollama_server import running_fake_ollama
from reliability_helpers import run_cli

from prisma_core import pipeline
from prisma_core.concepts.families import FamilyConfig
from prisma_core.concepts.themes import ThemeConfig
from ui.state import bump_revision
from ui.themes import ALL_THEMES

pytest_plugins = ["app_fixtures"]  # the shared trained workspace


def rarest_keyword_feature(trained_app) -> int:
    """An active feature that only has its keyword label (the rarest: the other tests look at the densest)."""
    workspace, run_id = trained_app.workspace, trained_app.run_id
    features = workspace.feature_stats.of(run_id).sort_values(["density", "feature_id"])
    rows = workspace.labels.of(run_id)
    labelled = set(rows.loc[rows["source"] != "keywords", "feature_id"].astype(int))
    return next(int(f) for f in features.loc[features["density"] > 0, "feature_id"] if int(f) not in labelled)


def feature_card(at, feature: int):
    at.selectbox(key="feature_pick").select(feature).run()
    assert not at.exception, at.exception
    (title,) = [text for text in texts(at.subheader) if text.startswith("Feature #")]
    return title


def every_family(at):
    """The Families page with every theme's families listed (it opens on one theme)."""
    return at.selectbox(key="family_theme").select(ALL_THEMES).run()


def test_pages_show_themes_labels_and_families_the_command_line_changed(trained_app):
    workspace, dataset_id, run_id = trained_app.workspace, trained_app.dataset_id, trained_app.run_id
    before = pipeline.load_run(workspace, run_id)
    feature = rarest_keyword_feature(trained_app)
    features_session = open_page(new_app(dataset_id, run_id), "features")  # open before the change: cached views
    assert feature_card(features_session, feature) == f"Feature #{feature}: {before.features.at[feature, 'label']}"
    families_session = every_family(open_page(new_app(dataset_id, run_id), "families"))
    n_themes = 3 if len(before.theme_info) != 3 else 4
    tau = 0.5 if before.record.config["families"]["tau"] != 0.5 else 0.3
    try:
        with running_fake_ollama() as fake:
            for command in (
                ("themes", "--run", run_id, "--n-themes", str(n_themes)),
                ("label", "--run", run_id, "--features", str(feature), "--themes"),
                ("families", "--run", run_id, "--tau", str(tau), "--iterations", "2"),
            ):
                extra = ("--ollama-host", fake.url, "--model", "llama3.2") if command[0] == "label" else ()
                done = run_cli(*command, *extra, workspace=workspace.path)
                assert done.returncode == 0, done.stderr
        after = pipeline.load_run(workspace, run_id)
        assert len(after.theme_info) == n_themes and after.features.at[feature, "label_source"] == "llama3.2"

        for at in (features_session.run(), open_page(new_app(dataset_id, run_id), "features")):
            assert not at.exception, at.exception
            themes = at.dataframe(key="features_themes_table").value
            assert themes["theme"].tolist() == after.theme_info["theme_id"].tolist()
            assert themes["label"].tolist() == after.theme_info["label"].tolist()  # named by the LLM, not keywords
            assert feature_card(at, feature) == f"Feature #{feature}: {after.features.at[feature, 'label']}"
            assert at.number_input(key="n_themes").value == n_themes  # the regrouping form starts from them too
        for at in (families_session.run(), every_family(open_page(new_app(dataset_id, run_id), "families"))):
            assert not at.exception, at.exception
            shown = table(at, "family", "parent", "children")
            assert dict(zip(shown["family"], shown["size"], strict=True)) == {
                f.family_id: len(f.members) for f in after.families
            }
            assert (at.slider(key="tau").value, at.number_input(key="iterations").value) == (tau, 2)
    finally:  # the other tests expect the run's default families and themes, named by keywords
        pipeline.rebuild_families(workspace, run_id, FamilyConfig())
        pipeline.rebuild_themes(workspace, run_id, ThemeConfig())
        bump_revision(run_id)
