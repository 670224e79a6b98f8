"""Features page: the features table, search, a feature card's numbers, and editing a label by hand."""

import numpy as np
import pytest
from app_helpers import features_table, new_app, open_page, table, texts

from prisma_core import pipeline
from prisma_core.concepts import analysis
from prisma_core.interpret.label_scores import ScoreConfig
from prisma_core.reading.explore import search_features
from prisma_core.reading.feature_queries import MIN_CLOSENESS, NEAREST_FEATURES
from ui.cards import TOP_DOCUMENTS

pytest_plugins = ["app_fixtures"]  # the shared trained workspace


def features_page(trained_app):
    at = new_app(trained_app.dataset_id, trained_app.run_id)
    return open_page(at, "features")


def test_table_lists_the_features_found_in_every_training_first_with_core_values(trained_app):
    at = features_page(trained_app)
    assert not at.exception
    run = pipeline.load_run(trained_app.workspace, trained_app.run_id)
    shown = features_table(at)
    kept = run.record.metrics["features_kept"]
    assert len(shown) == len(run.features) == kept <= run.settings.sae.n_features
    compared = run.settings.sae.n_trainings
    everywhere = run.features["found_in"] == compared
    assert (shown["comes_back"].head(int(everywhere.sum())) == f"found in {compared} of {compared} trainings").all()
    kept_when_found_in = range(run.settings.sae.kept_at_least(), compared + 1)
    assert set(shown["comes_back"]) <= {f"found in {found} of {compared} trainings" for found in kept_when_found_in}
    topics = shown[~shown["label"].str.startswith("background: ")]
    for words, group in topics.groupby("comes_back", sort=False):
        assert group["density"].is_monotonic_decreasing, words  # densest first among the equally reliable
    expected = run.features.set_index("feature_id")
    for row in shown.head(20).itertuples():
        assert row.label == expected.at[row.feature_id, "label"]
        assert row.density == expected.at[row.feature_id, "density"]
        assert row.mean_activation == pytest.approx(expected.at[row.feature_id, "mean_activation"])
    everywhere_words = f"{int(everywhere.sum())} found in all {compared} trainings, listed first"
    assert f"{kept} of {kept} features shown · {everywhere_words}" in (" ".join(texts(at.caption)))


def test_a_less_reliable_or_background_feature_says_what_that_means(trained_app):
    at = features_page(trained_app)
    run = pipeline.load_run(trained_app.workspace, trained_app.run_id)
    features = run.features.set_index("feature_id")
    compared = run.settings.sae.n_trainings
    less = features.index[(features["found_in"] < compared) & ~features["background"]]
    reliable = features.index[(features["found_in"] == compared) & ~features["background"]]
    assert len(reliable) and len(less)  # the small app run has both
    at.selectbox(key="feature_pick").select(int(less[0])).run()
    found = int(features.at[less[0], "found_in"])
    assert any(f"Less reliable: found in {found} of {compared} trainings" in warning for warning in texts(at.warning))
    at.selectbox(key="feature_pick").select(int(reliable[0])).run()
    assert f"Comes back: found in {compared} of {compared} trainings." in texts(at.caption)
    assert not any("Less reliable" in warning for warning in texts(at.warning))


def test_search_filters_by_label(trained_app):
    at = features_page(trained_app)
    run = pipeline.load_run(trained_app.workspace, trained_app.run_id)
    word = run.features.sort_values("density", ascending=False)["label"].iloc[0].split(" · ")[0]
    at.text_input(key="feature_search").input(word).run()
    shown = features_table(at)
    assert sorted(shown["feature_id"]) == sorted(search_features(run, word)["feature_id"])
    described = run.features.set_index("feature_id").loc[shown["feature_id"]]
    assert all(word.lower() in f"{r.label} {r.description}".lower() for r in described.itertuples())
    assert 0 < len(shown) < len(run.features)


def test_feature_card_shows_the_core_numbers(trained_app):
    at = features_page(trained_app)
    run = pipeline.load_run(trained_app.workspace, trained_app.run_id)
    feature = int(run.features.sort_values("density", ascending=False)["feature_id"].iloc[3])
    at.selectbox(key="feature_pick").select(feature).run()
    assert not at.exception
    row = run.features.set_index("feature_id").loc[feature]
    assert card_title(at) == f"Feature #{feature}: {row['label']}"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Active on"] == f"{row['density']} docs"
    assert metrics["Typical strength"] == f"{row['mean_activation']:.3f}"
    assert metrics["Label from"] == "keywords"

    top = table(at, "activation", "doc_id")
    expected_top = analysis.top_documents(run.codes, feature, TOP_DOCUMENTS)
    assert top["activation"].tolist() == pytest.approx(expected_top["value"].round(4).tolist())
    assert top["doc_id"].tolist() == trained_app.frame["id"].iloc[expected_top["position"]].tolist()
    zero = table(at, "doc_id", "title", "text", exact=True)
    zero_positions = analysis.zero_documents(run.codes, feature, 5)
    assert zero["doc_id"].tolist() == trained_app.frame["id"].iloc[zero_positions].tolist()
    assert not set(zero["doc_id"]) & set(top["doc_id"])
    cosines = run.directions @ run.directions[feature]
    alive = run.features.set_index("feature_id")["density"] > 0
    ranked = [f for f in np.argsort(-cosines, kind="stable") if f != feature and alive[f]]
    close = [f for f in ranked if cosines[f] >= MIN_CLOSENESS][:NEAREST_FEATURES]
    if not close:  # a small run's features can all point elsewhere: then the card says so
        assert "No other feature stands for anything close to this one." in [c.value for c in at.caption]
        return
    nearest = table(at, "cosine")
    assert nearest["feature_id"].tolist() == close  # unrelated directions are not called similar
    assert nearest["cosine"].tolist() == pytest.approx(cosines[close].tolist(), abs=1e-5)
    assert not nearest["label"].str.endswith(tuple(f" #{f}" for f in nearest["feature_id"])).any()


def test_manual_label_replaces_the_shown_label_and_can_be_undone(trained_app):
    at = features_page(trained_app)
    per_feature = trained_app.workspace.labels.of(trained_app.run_id).groupby("feature_id").size()
    ranked = pipeline.load_run(trained_app.workspace, trained_app.run_id).features.sort_values("density")
    feature = next(int(f) for f in reversed(ranked["feature_id"].tolist()) if per_feature[f] == 1)  # keywords only
    at.selectbox(key="feature_pick").select(feature).run()
    at.text_input(key="features_manual_label").input("UK general election <b>2005</b>")
    at.text_area(key="features_manual_description").input("Campaign coverage.")
    at.button(key=f"FormSubmitter:features_manual_{feature}-Save label").click().run()
    assert not at.exception
    run = pipeline.load_run(trained_app.workspace, trained_app.run_id)
    row = run.features.set_index("feature_id").loc[feature]
    assert (row["label"], row["label_source"]) == ("UK general election <b>2005</b>", "manual")
    assert card_title(at) == f"Feature #{feature}: UK general election <b>2005</b>"
    assert features_table(at).set_index("feature_id").at[feature, "label"] == row["label"]
    interpretations = table(at, "source", "preferred")
    assert sorted(interpretations["source"]) == ["keywords", "manual"]

    keyword_label = next(i for i in interpretations_ids(trained_app, feature) if i != row["interpretation_id"])
    at.radio(key=f"features_prefer_{feature}").set_value(keyword_label)
    at.button(key="features_prefer_button").click().run()
    assert not at.exception
    restored = pipeline.load_run(trained_app.workspace, trained_app.run_id).features.set_index("feature_id")
    assert restored.at[feature, "label_source"] == "keywords"
    assert texts(at.metric)[3] == "keywords"


def card_title(at) -> str:
    """The open feature card's heading (the page's other headings name its sections)."""
    (title,) = [text for text in texts(at.subheader) if text.startswith("Feature #")]
    return title


def interpretations_ids(trained_app, feature):
    stored = trained_app.workspace.labels.of(trained_app.run_id)
    return stored.loc[stored["feature_id"] == feature, "interpretation_id"].tolist()


def select_row(at, row: int):
    """Click a row of the features table, as the browser reports it (the table's selection state)."""
    (key,) = [frame.key for frame in at.dataframe if (frame.key or "").startswith("features_table:")]
    at.session_state[key] = {"selection": {"rows": [row], "columns": [], "cells": []}}
    return at.run()


def test_a_search_with_no_match_after_clicking_a_row_says_so_without_a_traceback(trained_app):
    at = features_page(trained_app)
    select_row(at, 4)
    fifth = int(features_table(at)["feature_id"].iloc[4])
    assert at.selectbox(key="feature_pick").value == fifth
    at.text_input(key="feature_search").input("oximetry").run()
    assert not at.exception
    assert features_table(at).empty
    assert any("No feature label or description mentions “oximetry”" in text for text in texts(at.info))
    assert at.selectbox(key="feature_pick").value == fifth  # the open card stays


def test_saving_a_label_during_a_search_keeps_the_card_and_confirms(trained_app):
    at = features_page(trained_app)
    run = pipeline.load_run(trained_app.workspace, trained_app.run_id)
    live = run.features[(run.features["density"] > 0) & ~run.features["label"].str.startswith("(")]
    words = live["label"].str.lower().str.split(r"\W+", regex=True).explode()
    word = words[words.str.len() >= 4].value_counts().index[0]  # the word most labels of live features share
    assert (search_features(run, word)["density"].iloc[:2] > 0).all()
    at.text_input(key="feature_search").input(word).run()
    select_row(at, 1)
    feature = int(features_table(at)["feature_id"].iloc[1])
    assert at.selectbox(key="feature_pick").value == feature
    at.text_input(key="features_manual_label").input("budget talks")
    at.button(key=f"FormSubmitter:features_manual_{feature}-Save label").click().run()
    assert not at.exception
    assert at.selectbox(key="feature_pick").value == feature
    assert card_title(at) == f"Feature #{feature}: budget talks"
    assert f"Saved: feature #{feature} is now labelled “budget talks”." in texts(at.success)
    scores = table(at, "source", "preferred").set_index("source")["score"]
    features = pipeline.load_run(trained_app.workspace, trained_app.run_id).features.set_index("feature_id")
    n_strong = features.at[feature, "n_strong"]
    assert scores["manual"] == ("not scored" if n_strong >= ScoreConfig().min_positives else "not enough evidence")
