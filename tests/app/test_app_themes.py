"""The concept hierarchy in the app: themes on Home and Features, drill-down to a theme's families and features,
one theme at a time on Families, queries and group comparison at every level, the map, regrouping into N themes."""

import json

import numpy as np
import pytest
from app_helpers import new_app, open_page, table, tables, texts, wait_for_job

from prisma_core import pipeline
from prisma_core.compare.prevalence import group_comparison, ranked
from prisma_core.concepts import analysis
from prisma_core.reading.explore import level_units
from prisma_core.reading.overview import nested_subthemes
from ui.map import map_job_key
from ui.state import job_registry
from ui.themes import ALL_THEMES, THEME_KEY, regroup_job_key

pytest_plugins = ["app_fixtures"]  # the shared trained workspace


@pytest.fixture
def run(trained_app):
    return pipeline.load_run(trained_app.workspace, trained_app.run_id)


def theme_families(run, theme_id):
    """The families a theme lists: their parent belongs to it and fires with a child on enough of its documents."""
    theme_of = run.features.set_index("feature_id")["theme_id"]
    active = run.codes.toarray() > 0
    in_theme = run.themes.members().toarray()[:, theme_id] > 0 if theme_id >= 0 else np.zeros(len(active), bool)

    def meets(family) -> bool:
        children = active[:, [m for m in family.members if m != family.parent]].any(axis=1)
        return int((active[:, family.parent] & children & in_theme).sum()) >= run.settings.families.min_shared

    listed = [f for f in run.families if theme_of[f.parent] == theme_id and meets(f)]
    return sorted(listed, key=lambda f: -len(f.members))


def assert_themes_table(shown, run, n_docs):
    assert shown["theme"].tolist() == run.theme_info["theme_id"].tolist()
    assert shown["label"].tolist() == run.theme_info["label"].tolist()
    assert shown["documents"].tolist() == run.theme_info["n_documents"].tolist()
    assert shown["features"].tolist() == [len(f) for f in run.theme_info["features"]]
    assert shown["share"].tolist() == pytest.approx((run.theme_info["n_documents"] / n_docs).tolist())
    assert shown["families"].tolist() == [len(theme_families(run, t)) for t in run.theme_info["theme_id"]]


def with_the_map(at, trained_app, run):
    """The page again once the map of the documents is drawn: the first view of a dataset draws it in the
    background (and keeps it in the workspace for every later view)."""
    key = map_job_key(trained_app.dataset_id, run.record.embedding_key)
    if job_registry().get(key) is not None:
        wait_for_job(key)
    return at.run()


def test_features_page_opens_on_the_themes(trained_app, run):
    at = open_page(new_app(trained_app.dataset_id, trained_app.run_id), "features")
    assert not at.exception
    assert texts(at.subheader)[0] == "Themes"
    assert 3 <= len(run.theme_info) <= 7
    assert_themes_table(at.dataframe(key="features_themes_table").value, run, len(trained_app.frame))
    assert any("a **theme** is a broad subject" in c.value for c in at.caption)
    # the largest theme is open: its top documents belong to it, most certain first
    assert texts(at.subheader)[1] == f"Theme 0: {run.theme_info.at[0, 'label']}"
    documents = table(at, "doc_id", "certainty")
    members = run.themes.members()[:, 0].toarray().ravel() > 0
    positions = trained_app.frame.reset_index().set_index("id").loc[documents["doc_id"], "index"]
    assert members[positions].all()
    assert documents["certainty"].is_monotonic_decreasing


def test_drill_down_shows_the_themes_families_and_features(trained_app, run):
    at = open_page(new_app(trained_app.dataset_id, trained_app.run_id), "features")
    theme = int(run.theme_info["theme_id"].iloc[-1])
    at.selectbox(key="features_theme_pick").select(theme).run()
    assert not at.exception
    assert texts(at.subheader)[1] == f"Theme {theme}: {run.theme_info.at[theme, 'label']}"
    families = table(at, "family", "general concept")
    assert families["family"].tolist() == [f.family_id for f in theme_families(run, theme)]
    features = at.dataframe(key="features_theme_features").value
    assert features["feature_id"].tolist() == list(run.theme_info.at[theme, "features"])
    assert (run.features.set_index("feature_id").loc[features["feature_id"], "theme_id"] == theme).all()


def test_a_theme_opens_its_sub_themes(trained_app, run):
    at = open_page(new_app(trained_app.dataset_id, trained_app.run_id), "features")
    per_theme = run.subtheme_info["theme_id"].value_counts()
    for alone in per_theme.index[per_theme == 1]:  # a theme's only sub-theme is the theme: no level below it
        at.selectbox(key="features_theme_pick").select(int(alone)).run()
        assert not tables(at, "subtheme", "examples")
        assert "This theme is not split into narrower subjects: its documents make one subject." in texts(at.caption)
    theme = int(per_theme.index[per_theme >= 2][0])
    at.selectbox(key="features_theme_pick").select(theme).run()
    assert not at.exception
    shown = table(at, "subtheme", "examples")
    inside = run.subtheme_info[run.subtheme_info["theme_id"] == theme]
    assert shown["subtheme"].tolist() == inside["subtheme_id"].tolist() and len(shown) >= 1
    assert shown["label"].tolist() == inside["label"].tolist()
    assert shown["documents"].tolist() == inside["n_documents"].tolist()
    assert shown["documents"].sum() == (run.themes.strongest() == theme).sum()
    label_of = run.features.set_index("feature_id")["label"]
    first = [" · ".join(label_of[f] for f in features[:3]) for features in inside["features"]]
    assert shown["features"].tolist() == first
    assert all(examples for examples in shown["examples"])
    assert any(f"Sub-themes of this theme** ({len(inside)})" in m for m in texts(at.markdown))


def test_the_documents_that_fit_no_theme_well_are_counted(trained_app, run):
    at = new_app(trained_app.dataset_id, trained_app.run_id)
    assert not at.exception
    unfit = int((~run.themes.fits()).sum())
    sentence = next(m for m in texts(at.markdown) if "theme well" in m)
    if unfit:
        verb = "fits" if unfit == 1 else "fit"
        assert sentence.startswith(f"{unfit:,} document") and f"{verb} no theme well" in sentence
        listed = table(at, "document", "closest theme")
        assert len(listed) == min(unfit, 200)
        assert (listed["closest theme's share"] < run.themes.fit_share).all()
    else:
        assert sentence == "Every document fits a theme well."
    assert any(f"split into {len(nested_subthemes(run))} sub-themes" in c.value for c in at.caption)


def test_home_shows_the_themes_and_the_map(trained_app, run):
    at = new_app(trained_app.dataset_id, trained_app.run_id)
    assert not at.exception
    assert "What this collection is about" in texts(at.subheader)
    assert_themes_table(at.dataframe(key="home_themes_table").value, run, len(trained_app.frame))
    with_the_map(at, trained_app, run)
    (chart,) = at.get("vega_lite_chart")
    spec = json.loads(chart.proto.spec)
    assert spec["mark"]["type"] == "circle"
    assert spec["encoding"]["color"]["field"] == "theme"
    assert [t["field"] for t in spec["encoding"]["tooltip"]] == ["theme", "subtheme", "doc_id", "title", "text"]


def test_families_draws_one_theme_at_a_time(trained_app, run):
    at = open_page(new_app(trained_app.dataset_id, trained_app.run_id), "families")
    assert not at.exception
    theme = at.selectbox(key="family_theme").value
    assert theme == next(t for t in run.theme_info["theme_id"] if theme_families(run, t))
    shown = table(at, "family", "parent", "children")
    assert shown["family"].tolist() == [f.family_id for f in theme_families(run, theme)]
    at.selectbox(key="family_theme").select(ALL_THEMES).run()
    assert len(table(at, "family", "parent", "children")) == len(run.families)


def explore(trained_app, tab):
    at = new_app(trained_app.dataset_id, trained_app.run_id)
    at.session_state["explore_tab"] = tab
    return open_page(at, "explore")


@pytest.mark.parametrize("level", ["theme", "subtheme", "family"])
def test_concept_query_at_a_level_returns_the_core_documents(trained_app, run, level):
    codes, _ = level_units(run, level)
    at = explore(trained_app, "Concept query")
    at.radio(key="query_level").set_value(level).run()
    densest = (codes > 0).sum(axis=0).A1.argsort()[::-1]
    must, must_not = int(densest[0]), int(densest[1])
    at.multiselect(key=f"must_{level}").select(must)
    at.multiselect(key=f"must_not_{level}").select(must_not).run()
    assert not at.exception
    positions = analysis.concept_query(codes, {must: 0.0}, {must_not: 0.0})
    assert 0 < len(positions) < len(trained_app.frame)
    assert {m.label: m.value for m in at.metric}["Matching documents"] == f"{len(positions):,}"
    shown = table(at, "doc_id", "title", "text")
    assert shown["doc_id"].tolist() == trained_app.frame["id"].iloc[positions].tolist()


def test_group_comparison_at_the_theme_level(trained_app, run):
    at = explore(trained_app, "Compare groups")
    at.radio(key="compare_level").set_value("theme").run()
    assert not at.exception
    shown = table(at, "group", "concept")
    codes, units = level_units(run, "theme")
    expected = ranked(group_comparison(codes, trained_app.frame["category"])).groupby("group").head(5)
    assert shown["group"].tolist() == expected["group"].tolist()
    assert shown["concept"].tolist() == [f"Theme {t}: {units.at[t, 'label']}" for t in expected["feature_id"]]
    assert shown["prevalence"].tolist() == pytest.approx(expected["prevalence"].tolist())
    assert (shown.groupby("group")["verdict"].first() == "holds").all()  # every desk has a theme of its own


def test_refraction_shows_the_strong_concepts_first_and_folds_the_weak(trained_app, run):
    strong_all = analysis.strong_codes(run.codes)
    doc = next(d for d in range(run.codes.shape[0]) if 0 < strong_all[d].nnz < run.codes[d].nnz)  # has weak ones
    at = explore(trained_app, "Refract")
    at.selectbox(key="refract_doc").select(doc).run()
    assert not at.exception
    strong = strong_all[doc]
    shown, weak = tables(at, "feature_id", "value", "label")
    assert shown["feature_id"].tolist() == strong.indices[(-strong.data).argsort(kind="stable")].tolist()
    assert len(shown) + len(weak) == run.codes[doc].nnz
    assert weak["value"].max() < 0.25 * shown["value"].max()
    assert any(c.value.startswith("Themes of this document:") for c in at.caption)


def test_map_tab_draws_every_document(trained_app, run):
    at = with_the_map(explore(trained_app, "Map"), trained_app, run)
    assert not at.exception
    (chart,) = at.get("vega_lite_chart")
    spec = json.loads(chart.proto.spec)
    assert spec["encoding"]["color"]["field"] == "theme"
    assert "Each dot is a document" in at.caption[0].value


def test_regroup_into_three_themes(trained_app, run):
    at = open_page(new_app(trained_app.dataset_id, trained_app.run_id), "features")
    n_themes = 3 if len(run.theme_info) != 3 else 4
    at.number_input(key="n_themes").set_value(n_themes)
    at.number_input(key="n_subthemes").set_value(n_themes + 2)
    at.button(key="regroup").click().run()
    wait_for_job(regroup_job_key(trained_app.run_id))
    at.run()
    assert not at.exception
    regrouped = pipeline.load_run(trained_app.workspace, trained_app.run_id)
    assert len(regrouped.theme_info) == regrouped.themes.n_themes == n_themes
    assert len(regrouped.subtheme_info) == regrouped.subthemes.n_subthemes == n_themes + 2
    assert_themes_table(at.dataframe(key="features_themes_table").value, regrouped, len(trained_app.frame))
    assert THEME_KEY not in at.session_state or at.session_state[THEME_KEY] < n_themes
