"""Explore page: refraction, semantic search, concept queries and group comparison, checked against the core."""

import io
import json

import pandas as pd
import pytest
from app_helpers import new_app, open_page, refracted_text, table, tables, texts

from prisma_core import pipeline
from prisma_core.compare import MAX_Q
from prisma_core.compare.prediction import group_predictors
from prisma_core.compare.prevalence import group_comparison, q_text, range_text, ranked, summarise
from prisma_core.concepts import analysis
from prisma_core.ingest import IngestConfig
from prisma_core.pipeline.downloads import export_in_workspace, features_csv
from prisma_core.reading.explore import (
    DatasetDocuments,
    DocumentVectors,
    level_units,
    refract_document,
    refract_text,
    search_documents,
)
from prisma_core.sae import SAEConfig

pytest_plugins = ["app_fixtures"]  # the shared trained workspace


@pytest.fixture(scope="module")
def run(trained_app):
    return pipeline.load_run(trained_app.workspace, trained_app.run_id)


def explore(trained_app, tab: str):
    at = new_app(trained_app.dataset_id, trained_app.run_id)
    at.session_state["explore_tab"] = tab
    return open_page(at, "explore")


def test_refract_a_document(trained_app, run):
    at = explore(trained_app, "Refract")
    at.selectbox(key="refract_doc").select(17).run()
    assert not at.exception
    shown = pd.concat(tables(at, "feature_id", "value", "label"))
    expected = refract_document(run, 17)
    assert shown["feature_id"].tolist() == expected["feature_id"].tolist()
    assert shown["value"].tolist() == pytest.approx(expected["value"].tolist())
    assert 0 < len(shown) <= run.record.config["sae"]["k"]  # the strong ones, then the weak ones folded away
    assert len(at.get("vega_lite_chart")) == 1
    refracted_text(at, trained_app.workspace, run, 17, trained_app.frame["text"].iloc[17])


def test_refract_typed_text(trained_app, run):
    text = "The striker scored twice as the club won the league title."
    at = explore(trained_app, "Refract")
    at.radio(key="refract_mode").set_value("Your own text").run()
    at.text_area(key="refract_text").input(text)
    at.button(key="refract_button").click().run()
    assert not at.exception
    shown = pd.concat(tables(at, "feature_id", "value", "label"))
    expected = refract_text(run, text)
    assert shown["feature_id"].tolist() == expected["feature_id"].tolist()
    assert shown["value"].tolist() == pytest.approx(expected["value"].tolist(), rel=1e-4)


def test_semantic_search(trained_app, run):
    query = "interest rates and the central bank"
    at = explore(trained_app, "Search")
    at.text_input(key="search_query").input(query).run()
    assert not at.exception
    shown = table(at, "similarity", "doc_id")
    ws = trained_app.workspace
    vectors = DocumentVectors.from_vectors(ws.vectors(trained_app.dataset_id, run.record.embedding_key))
    expected = search_documents(run, query, DatasetDocuments.open(ws, trained_app.dataset_id), vectors, 10)
    assert shown["doc_id"].tolist() == expected["doc_id"].tolist()
    assert shown["similarity"].tolist() == pytest.approx((1 - expected["distance"]).round(3).tolist(), abs=1e-3)
    categories = trained_app.frame.set_index("id").loc[shown["doc_id"].head(5), "category"]
    assert (categories == "business").sum() >= 3
    at.selectbox(key="search_read").select(2).run()  # a result opens whole
    whole = trained_app.frame.set_index("id").at[expected["doc_id"].iloc[2], "text"]
    assert whole in texts(at.get("text"))


def test_concept_query_counts_and_documents(trained_app, run):
    densest = run.features.sort_values("density", ascending=False)["feature_id"].tolist()
    must, must_not = densest[0], densest[1]
    threshold = float(run.features.set_index("feature_id").at[must, "mean_activation"]) / 2
    at = explore(trained_app, "Concept query")
    at.multiselect(key="must").select(must)
    at.multiselect(key="must_not").select(must_not).run()
    at.number_input(key=f"threshold_must_{must}").set_value(round(threshold, 3)).run()
    assert not at.exception
    positions = analysis.concept_query(run.codes, {must: round(threshold, 3)}, {must_not: 0.0})
    assert 0 < len(positions) < len(trained_app.frame)
    assert {m.label: m.value for m in at.metric}["Matching documents"] == f"{len(positions):,}"
    shown = table(at, "doc_id", "title", f"strength #{must}")
    assert shown["doc_id"].tolist() == trained_app.frame["id"].iloc[positions].tolist()
    assert (shown[f"strength #{must}"] > round(threshold, 3)).all()
    # Enter in the feature search picks the highlighted feature: the "Select all matches" action is never offered
    assert at.multiselect(key="must").proto.HasField("select_all") and at.multiselect(key="must").proto.select_all == 0
    assert at.multiselect(key="must_not").proto.select_all == 0
    (button,) = at.get("download_button")
    assert button.label == "Download matching documents (CSV)"
    assert button.proto.ignore_rerun  # a click that reran the page could retire the file before the browser fetched it


def test_group_comparison_by_category(trained_app, run):
    at = explore(trained_app, "Compare groups")
    assert not at.exception
    assert at.selectbox(key="group_column").value == "category"
    sizes = table(at, "group", "documents", exact=True).set_index("group")["documents"]
    assert sizes.to_dict() == trained_app.frame["category"].value_counts().to_dict()
    shown = table(at, "group", "concept", "prevalence", "lift", "q", "verdict")
    full = group_comparison(level_units(run, "feature")[0], trained_app.frame["category"])
    expected = ranked(full, MAX_Q).groupby("group").head(5)
    assert shown["group"].tolist() == expected["group"].tolist()
    assert shown["n_documents"].tolist() == expected["n_documents"].tolist()
    assert shown["prevalence"].tolist() == pytest.approx(expected["prevalence"].tolist())
    assert shown["difference"].tolist() == pytest.approx(expected["difference"].tolist())
    assert shown["q"].tolist() == [q_text(q) for q in expected["q_value"]]
    assert shown["verdict"].tolist() == ["holds" if h else "could be chance" for h in expected["holds"]]
    assert shown["prevalence_range"].tolist() == range_text(expected["prevalence_low"], expected["prevalence_high"])
    sentence = summarise(full, MAX_Q).sentence("feature")
    assert sentence in texts(at.markdown) and f"{len(full):,} comparisons" in sentence
    assert expected["holds"].any()  # 150 BBC articles: some of the desks' features hold
    (chart,) = at.get("vega_lite_chart")
    spec = json.loads(chart.proto.spec)
    x, y = spec["encoding"]["x"], spec["encoding"]["y"]
    assert x["axis"]["labelOverlap"] is False and x["sort"] == sizes.index.tolist()  # every group named, largest first
    ids = [int(name.split(" ")[0].lstrip("#")) for name in y["sort"]]
    assert ids == sorted(ids) and set(ids) == set(shown["concept"].str.split(" ").str[0].str.lstrip("#").astype(int))
    (button,) = [b for b in at.get("download_button") if b.proto.id and "statistics" in b.label]
    assert button.label == f"Every comparison with its statistics (CSV, {len(full):,} rows)"


def test_the_q_threshold_changes_which_differences_hold(trained_app, run):
    at = explore(trained_app, "Compare groups")
    at.select_slider(key="max_q").set_value(0.001).run()
    assert not at.exception
    full = group_comparison(level_units(run, "feature")[0], trained_app.frame["category"])
    strict = summarise(full, 0.001)
    assert strict.n_hold == int((full["q_value"] < 0.001).sum()) < summarise(full, MAX_Q).n_hold
    assert strict.sentence("feature") in texts(at.markdown)
    shown = table(at, "group", "concept", "verdict")
    expected = ranked(full, 0.001).groupby("group").head(5)
    assert shown["verdict"].tolist() == ["holds" if h else "could be chance" for h in expected["holds"]]


def test_the_concepts_that_predict_the_groups_are_scored_on_unseen_documents(trained_app, run):
    at = explore(trained_app, "Compare groups")
    at.radio(key="compare_level").set_value("theme").run()
    at.toggle(key="predict_groups").set_value(True).run()
    assert not at.exception
    codes, units = level_units(run, "theme")
    found = group_predictors(codes, trained_app.frame["category"])
    assert found.sentence() in texts(at.markdown)
    assert found.accuracy > 2 * found.baseline  # desks are predictable from themes on documents never seen
    shown = table(at, "group", "concept", "gain", "share")
    expected = found.frame.groupby("group").head(5)
    assert shown["concept"].tolist() == [
        f"Theme {units.at[t, 'unit']}: {units.at[t, 'label']}" for t in expected["feature_id"]
    ]
    assert shown["gain"].tolist() == pytest.approx(expected["gain"].tolist())


def test_downloads_are_offered(trained_app):
    at = explore(trained_app, "Downloads")
    assert not at.exception
    assert at.selectbox(key="report_column").value == "category"  # the report compares the desks by default
    assert at.radio(key="report_level").value == "theme"
    assert [b.label for b in at.get("download_button")] == [
        "Report (HTML, one file to share)",
        "Labels (CSV)",
        "Activations per document and feature (Parquet)",
        "Families (JSON)",
        "Themes (JSON)",
        "Documents with their themes (Parquet)",
        "SAE weights (safetensors)",
        "Run configuration and metrics (JSON)",
    ]
    assert all(b.proto.ignore_rerun for b in at.get("download_button"))


def test_the_labels_csv_holds_the_exported_feature_table(trained_app):
    folder = export_in_workspace(trained_app.workspace, trained_app.run_id)
    assert folder == trained_app.workspace.path / "exports" / trained_app.run_id
    exported = pd.read_parquet(folder / "features.parquet")
    table = pd.read_csv(io.StringIO(features_csv(folder)))
    assert list(table.columns) == list(exported.columns)
    assert table["feature_id"].tolist() == exported["feature_id"].tolist()
    assert table["density"].tolist() == exported["density"].tolist()


def test_the_reports_column_starts_from_the_one_compared_and_stays_as_chosen(trained_app):
    """Issue 45: the report's group column went back to the first column as soon as the page reran."""
    workspace = trained_app.workspace
    frame = trained_app.frame.assign(source=["wire" if i % 2 else "staff" for i in range(len(trained_app.frame))])
    upload = ("two_columns.csv", frame.to_csv(index=False).encode())
    config = IngestConfig(text_column="text", title_column="title", id_column="id")
    dataset_id, _ = pipeline.ingest(workspace, [upload], "two columns", config)
    try:
        pipeline.embed_dataset(workspace, dataset_id)  # the same texts: read from the cache
        run_id = pipeline.train_run(
            workspace, dataset_id, SAEConfig(n_features=16, k=4, epochs=2, n_trainings=1)
        ).run_id
        at = new_app(dataset_id, run_id)
        at.session_state["explore_tab"] = "Compare groups"
        open_page(at, "explore")
        assert at.selectbox(key="group_column").options[:2] == ["category (5 groups)", "source (2 groups)"]
        at.selectbox(key="group_column").select("source").run()
        at.session_state["explore_tab"] = "Downloads"
        at.run()
        assert at.selectbox(key="report_column").value == "source"  # the column compared last
        at.radio(key="report_level").set_value("feature").run()
        assert at.selectbox(key="report_column").value == "source"  # it went back to "category" here
        at.selectbox(key="report_column").select("category").run()
        at.radio(key="report_level").set_value("family").run()
        assert at.selectbox(key="report_column").value == "category" and not at.exception
    finally:
        workspace.delete_dataset(dataset_id)
