"""Sub-themes, the level inside the themes: nesting, counts chosen or given, coverage, storage, export and the
command line, on the small real run (60 BBC articles through the pipeline)."""

import json
import re

import numpy as np
import pandas as pd
import pytest
from reliability_helpers import run_cli

from prisma_core import pipeline
from prisma_core.concepts.subthemes import subtheme_counts
from prisma_core.concepts.themes import NO_THEME, ThemeConfig
from prisma_core.reading.explore import DatasetDocuments, level_units
from prisma_core.reading.overview import coverage_sentence, subthemes_table, unfit_documents


def assert_nested(run):
    """Every sub-theme belongs to one theme, every theme has one, and a document's sub-theme is inside its theme."""
    subthemes, strongest = run.subthemes, run.themes.strongest()
    assert set(subthemes.theme.tolist()) <= set(range(run.themes.n_themes))
    assert set(strongest[strongest >= 0].tolist()) <= set(subthemes.theme.tolist())
    placed = subthemes.assignment >= 0
    np.testing.assert_array_equal(placed, strongest >= 0)
    np.testing.assert_array_equal(subthemes.theme[subthemes.assignment[placed]], strongest[placed])
    assert (np.diff(subthemes.theme) >= 0).all(), "numbered theme by theme"
    assert run.subtheme_info["subtheme_id"].tolist() == list(range(subthemes.n_subthemes))
    assert run.subtheme_info["theme_id"].tolist() == subthemes.theme.tolist()
    assert run.subtheme_info["n_documents"].tolist() == subthemes.sizes().tolist()
    feature_theme = run.features["theme_id"].to_numpy()
    feature_subtheme = run.features["subtheme_id"].to_numpy()
    has = feature_subtheme >= 0
    np.testing.assert_array_equal(subthemes.theme[feature_subtheme[has]], feature_theme[has])


@pytest.fixture
def regrouped(small_run, tmp_path):
    workspace = small_run.copy(tmp_path / "workspace")
    return workspace, small_run.run.run_id


def test_training_stores_nested_sub_themes_with_names_and_features(small_run):
    from prisma_core.store import Workspace

    run = pipeline.load_run(Workspace(small_run.path), small_run.run.run_id)
    assert_nested(run)
    firing = int((run.codes.getnnz(axis=0) > 0).sum())
    assert run.themes.n_themes < run.subthemes.n_subthemes <= subtheme_counts(run.themes.n_themes, 60, None, firing)[-1]
    assert run.subthemes.n_subthemes <= firing  # never more sub-themes than the features they group
    assert run.record.metrics["n_subthemes"] == run.subthemes.n_subthemes
    assert run.subtheme_info["label"].str.len().gt(0).all()
    for row in run.subtheme_info.itertuples():  # strongest features first, each with evidence for its sub-theme
        evidence = run.subthemes.evidence[row.features, row.subtheme_id]
        assert (evidence > 0).all() and (np.diff(evidence) <= 0).all()


def test_the_numbers_of_themes_and_sub_themes_change_without_retraining(regrouped):
    workspace, run_id = regrouped
    before = pipeline.load_run(workspace, run_id)
    pipeline.rebuild_themes(workspace, run_id, ThemeConfig(n_themes=3, n_subthemes=7))
    run = pipeline.load_run(workspace, run_id)
    assert (run.themes.n_themes, run.subthemes.n_subthemes) == (3, 7)
    assert (run.codes != before.codes).nnz == 0
    assert_nested(run)
    assert run.record.config["themes"]["n_subthemes"] == 7
    pipeline.rebuild_themes(workspace, run_id, ThemeConfig(n_themes=3, n_subthemes=7))
    again = pipeline.load_run(workspace, run_id)
    np.testing.assert_array_equal(again.subthemes.assignment, run.subthemes.assignment)  # same settings, same result
    pipeline.rebuild_themes(workspace, run_id, ThemeConfig(n_themes=4, n_subthemes=2))
    fewer = pipeline.load_run(workspace, run_id)
    assert fewer.subthemes.n_subthemes == 4, "every theme keeps at least one sub-theme"
    assert_nested(fewer)


def test_sub_themes_are_a_level_to_query_and_to_read(regrouped):
    workspace, run_id = regrouped
    run = pipeline.load_run(workspace, run_id)
    members, units = level_units(run, "subtheme")
    assert units["unit"].tolist() == list(range(run.subthemes.n_subthemes))
    np.testing.assert_array_equal(np.asarray(members.sum(axis=0)).ravel(), run.subthemes.sizes())
    documents = DatasetDocuments.open(workspace, run.record.dataset_id)
    per_theme = np.bincount(run.subthemes.theme, minlength=run.themes.n_themes)
    split = int(np.flatnonzero(per_theme >= 2)[0])
    table = subthemes_table(run, documents, 2, theme_id=split)
    assert table["subtheme"].tolist() == run.subthemes.of_theme(split).tolist()
    assert (table["theme"] == split).all()
    assert table["documents"].sum() == (run.themes.strongest() == split).sum()
    assert all(0 < len(examples.split(" · ")) <= 2 for examples in table["examples"])
    for whole in np.flatnonzero(per_theme == 1):  # a theme's only sub-theme is the theme itself, not a level below
        assert subthemes_table(run, documents, 2, theme_id=int(whole)).empty


def test_documents_that_fit_no_theme_well_are_counted_and_listed(regrouped):
    workspace, run_id = regrouped
    pipeline.rebuild_themes(workspace, run_id, ThemeConfig(n_themes=5, fit_share=0.9))
    run = pipeline.load_run(workspace, run_id)
    best = run.themes.probabilities.max(axis=1)
    unfit = unfit_documents(run)
    np.testing.assert_array_equal(np.sort(unfit), np.flatnonzero(best < 0.9))
    assert (np.diff(best[unfit]) >= 0).all(), "least clear first"
    if len(unfit):
        assert coverage_sentence(run).startswith(f"{len(unfit):,} document")
        assert f"({len(unfit) / 60:.1%})" in coverage_sentence(run)
    pipeline.rebuild_themes(workspace, run_id, ThemeConfig(n_themes=5, fit_share=1e-6))
    assert coverage_sentence(pipeline.load_run(workspace, run_id)) == "Every document fits a theme well."


def test_the_export_carries_both_levels(regrouped, tmp_path):
    workspace, run_id = regrouped
    run = pipeline.load_run(workspace, run_id)
    out = tmp_path / "export"
    pipeline.export_run(workspace, run_id, out)
    documents = pd.read_parquet(out / "documents.parquet")
    np.testing.assert_array_equal(documents["subtheme_id"], run.subthemes.assignment)
    np.testing.assert_array_equal(documents["fits_theme"], run.themes.fits())
    features = pd.read_parquet(out / "features.parquet")
    assert features["subtheme_id"].tolist() == run.features["subtheme_id"].tolist()
    themes = json.loads((out / "themes.json").read_text())
    assert [[s["subtheme_id"] for s in t["subthemes"]] for t in themes] == [
        run.subthemes.of_theme(t["theme_id"]).tolist() for t in themes
    ]
    assert all(s["theme_id"] == t["theme_id"] for t in themes for s in t["subthemes"])


def test_a_run_grouped_before_sub_themes_existed_still_opens(regrouped):
    workspace, run_id = regrouped
    workspace.db.drop_table("subthemes")
    run = pipeline.load_run(workspace, run_id)
    assert run.subthemes is None and run.subtheme_info.empty
    assert (run.features["subtheme_id"] == NO_THEME).all()
    assert (pipeline.document_themes(run)["subtheme_id"] == NO_THEME).all()
    pipeline.rebuild_themes(workspace, run_id, ThemeConfig(n_themes=3))
    assert_nested(pipeline.load_run(workspace, run_id))


def test_the_themes_command_sets_both_numbers(regrouped):
    workspace, _ = regrouped
    result = run_cli("themes", "--n-themes", "3", "--n-subthemes", "6", workspace=workspace.path)
    assert result.returncode == 0, result.stderr
    assert "3 themes, 6 sub-themes" in result.stdout
    assert len(re.findall(r"^    sub-theme \d+: ", result.stdout, re.MULTILINE)) == 6
    assert re.search(
        r"(\d+ documents? \([\d.]+%\) fits? no theme well|Every document fits a theme well)", result.stdout
    )


@pytest.mark.parametrize(
    ("n_themes", "n_documents", "low", "high"),
    [(3, 2_315, 4, 68), (5, 2_225, 8, 67), (4, 7_600, 6, 123), (2, 60, 3, 11), (40, 100_000, 60, 300)],
)
def test_the_automatic_range_of_sub_themes(n_themes, n_documents, low, high):
    counts = subtheme_counts(n_themes, n_documents, None, n_features=4096)
    assert (counts[0], counts[-1]) == (low, high)
    assert counts == sorted(set(counts))
    assert subtheme_counts(n_themes, n_documents, 12, n_features=4096) == [12]


@pytest.mark.parametrize(("n_themes", "n_features"), [(5, 40), (7, 16), (3, 4), (6, 6)])
def test_sub_themes_never_outnumber_the_features(n_themes, n_features):
    """Each theme without a cluster of its own gets one sub-theme, so the clusters tried leave room for them: at
    most n_features sub-themes in all, however many documents."""
    for given in (None, 500):
        counts = subtheme_counts(n_themes, 2_225, given, n_features)
        assert counts[-1] >= 1 and counts[-1] + n_themes <= max(n_features, n_themes + 1)
