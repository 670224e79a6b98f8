"""One truth on every screen: after each kind of edit (hide, merge, rename, pin, split, at every level it applies to),
every consumer of the run is walked on the small real run, and the property asserted everywhere: no view names or
counts a hidden or merged-away concept, and every name shown belongs to the id beside it (its statistics too).

The consumers: the four levels' matrices (concept queries, comparisons), the comparison and the prediction of
groups, the concepts over time, the features lists and search, similar features, the diagnostics, the refraction
of every document, what the collection is about (themes, sub-themes, families and features of each theme,
documents that fit no theme, a document's themes), the export (every file and the labels CSV), the report (its
sections and its page), and the comparison of two runs' concepts."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from markupsafe import escape
from small_run import SmallRun

from prisma_core import pipeline
from prisma_core.carryover import carry
from prisma_core.compare.prediction import group_predictors
from prisma_core.compare.prevalence import group_comparison
from prisma_core.curation import edits
from prisma_core.names import feature_name, unit_name
from prisma_core.pipeline.downloads import features_csv
from prisma_core.pipeline.report import sections
from prisma_core.pipeline.report.config import ReportConfig
from prisma_core.pipeline.report.contents import gather
from prisma_core.pipeline.report.writer import report_html
from prisma_core.pipeline.trends import level_trends
from prisma_core.reading.explore import (
    LEVELS,
    DatasetDocuments,
    document_map,
    level_units,
    named_units,
    refract_document,
    search_features,
)
from prisma_core.reading.feature_queries import densest_features, nearest_active, ranked_features
from prisma_core.reading.overview import (
    document_theme_shares,
    family_counts,
    nested_subthemes,
    subthemes_table,
    theme_families_table,
    theme_features,
    themes_table,
    unfit_documents,
    unfit_documents_table,
)
from prisma_core.reading.runs import load_run
from prisma_core.run_shape.loaded_run import LoadedRun
from prisma_core.store import EditRecord, Workspace
from prisma_core.trends.periods import timeline


@dataclass(frozen=True)
class Truth:
    """What the edited run shows: each level's concepts (id -> label), and the ids trained but not shown."""

    labels: dict[str, dict[int, str]]
    gone: dict[str, set[int]]

    @classmethod
    def of(cls, run: LoadedRun, trained: LoadedRun) -> Truth:
        labels = {level: _labels(run, level) for level in LEVELS}
        gone = {level: set(_labels(trained, level)) - set(labels[level]) for level in LEVELS}
        return cls(labels, gone)

    def name(self, level: str, unit: int) -> str:
        """How the concept is named wherever it is shown ("Theme 2: label", "#12 label")."""
        assert unit in self.labels[level], f"{level} {unit} is not shown (gone: {unit in self.gone[level]})"
        label = self.labels[level][unit]
        return feature_name(unit, label) if level == "feature" else unit_name(level, unit, label)

    def gone_names(self, trained: LoadedRun) -> list[str]:
        """The names the concepts no longer shown had as trained."""
        names = []
        for level in LEVELS:
            labels = _labels(trained, level)
            for unit in self.gone[level]:
                label = labels[unit]
                names.append(feature_name(unit, label) if level == "feature" else unit_name(level, unit, label))
        return names


def _labels(run: LoadedRun, level: str) -> dict[int, str]:
    if level == "theme":
        pairs = zip(run.theme_info["theme_id"], run.theme_info["label"], strict=True)
    elif level == "subtheme":
        pairs = zip(run.subtheme_info["subtheme_id"], run.subtheme_info["label"], strict=True)
    elif level == "family":
        pairs = ((family.family_id, family.label) for family in run.families)
    else:
        shown = run.features[~run.features["hidden"]]
        pairs = zip(shown["feature_id"], shown["label"], strict=True)
    return {int(unit): str(label) for unit, label in pairs}


# -- the edits, one of each kind, on concepts chosen from the run ---------------------------------------------------


def _hidden_feature(run: LoadedRun) -> int:
    """A feature among a sub-theme's main concepts, in a family, and not the last (hiding it moves every column after
    it): the feature whose hiding shows the most."""
    in_subthemes = {int(f) for fs in run.subtheme_info["features"] for f in list(fs)[:3]}
    in_families = {int(m) for family in run.families for m in family.members if m != family.parent}
    firing = run.features.loc[run.features["density"] > 0, "feature_id"].astype(int)
    candidates = sorted(set(firing) & in_subthemes & in_families) or sorted(set(firing) & in_subthemes)
    assert candidates and candidates[0] < int(run.features["feature_id"].max())
    return candidates[0]


def _split_theme(run: LoadedRun) -> int:
    per_theme = run.subtheme_info["theme_id"].value_counts()
    assert (per_theme >= 2).any(), "the small run has a theme with two sub-themes or more"
    return int(per_theme[per_theme >= 2].index[0])


def _themes(run: LoadedRun) -> list[int]:
    themes = run.theme_info["theme_id"].astype(int).tolist()
    assert len(themes) >= 3
    return themes


def _subtheme(run: LoadedRun) -> int:
    return int(nested_subthemes(run)["subtheme_id"].iloc[0])


Edit = Callable[[Workspace, LoadedRun], EditRecord]
EDITS: dict[str, Edit] = {
    "hide a feature": lambda ws, run: edits.hide(ws, run, "feature", _hidden_feature(run)),
    "hide a theme": lambda ws, run: edits.hide(ws, run, "theme", _themes(run)[1]),
    "hide a family": lambda ws, run: edits.hide(ws, run, "family", run.families[0].family_id),
    "merge themes": lambda ws, run: edits.merge_themes(ws, run, _themes(run)[0], _themes(run)[1:3]),
    "split a theme": lambda ws, run: edits.split_theme(ws, run, _split_theme(run)),
    "rename a theme": lambda ws, run: edits.rename(ws, run, "theme", _themes(run)[0], "Mine <b>theme</b>"),
    "rename a sub-theme": lambda ws, run: edits.rename(ws, run, "subtheme", _subtheme(run), "Mine & sub"),
    "rename a family": lambda ws, run: edits.rename(ws, run, "family", run.families[-1].family_id, "Mine family"),
    "rename a feature": lambda ws, run: edits.rename(ws, run, "feature", _hidden_feature(run), "Mine feature"),
    "pin a theme": lambda ws, run: edits.pin(ws, run, "theme", _themes(run)[-1]),
    "pin a sub-theme": lambda ws, run: edits.pin(ws, run, "subtheme", _subtheme(run)),
    "pin a family": lambda ws, run: edits.pin(ws, run, "family", run.families[-1].family_id),
    "pin a feature": lambda ws, run: edits.pin(ws, run, "feature", _hidden_feature(run)),
}


DATED = timeline(pd.Series(pd.date_range("2024-01-01", periods=60, freq="W")), "quarter")
"""The small run's 60 documents given a week each: the periods Explore's Over time follows the concepts through."""


@pytest.fixture(scope="module")
def map_points(small_run: SmallRun) -> pd.DataFrame:
    workspace = Workspace(small_run.path)  # read only: the map is drawn, not saved
    run = load_run(workspace)
    return document_map(workspace.stored_vectors(run.record.dataset_id, run.record.embedding_key))


@pytest.mark.parametrize("kind", list(EDITS))
def test_no_view_names_or_counts_a_concept_it_does_not_show(kind, small_run: SmallRun, map_points, tmp_path):
    workspace = small_run.copy(tmp_path / "ws")
    trained = load_run(workspace)
    made = EDITS[kind](workspace, trained)
    run = load_run(workspace)
    assert run.edited.applied == (made,) and run.edited.not_applied == ()
    truth = Truth.of(run, load_run(workspace, with_edits=False))
    if made.action == "rename":
        assert truth.labels[made.level][made.target] == made.value["name"]
    if made.action in ("hide", "merge", "split"):
        assert any(truth.gone.values()), "the edit leaves a concept out"
    groups = workspace.metadata(run.record.dataset_id)["label"]
    documents = DatasetDocuments.open(workspace, run.record.dataset_id)

    _check_levels_and_comparisons(run, truth, groups)
    _check_feature_lists(run, truth)
    _check_overview(run, truth, documents)
    _check_export(workspace, run, truth, tmp_path / "export")
    _check_report(workspace, run, truth, trained, map_points)
    _check_runs_compared(run, truth)


def _check_levels_and_comparisons(run: LoadedRun, truth: Truth, groups: pd.Series) -> None:
    """Every level's units are the concepts shown; each comparison and prediction row names its own concept, and
    its counts are that concept's."""
    in_group = groups.astype("string").to_numpy()
    for level in LEVELS:
        codes, units = level_units(run, level)
        assert codes.shape[1] == len(units) == len(truth.labels[level])
        assert dict(zip(units["unit"], units["label"], strict=True)) == truth.labels[level]
        compared = named_units(group_comparison(codes, groups), level, units)
        present = sp.csc_matrix(codes) > 0
        for row in compared.itertuples():
            assert row.unit not in truth.gone[level] and row.concept == truth.name(level, row.unit)
            column = int(np.flatnonzero(units["unit"].to_numpy() == row.unit)[0])
            holding = present[:, column].toarray().ravel()
            assert row.n_documents == int((holding & (in_group == row.group)).sum())
        predicted = group_predictors(codes, groups)
        assert predicted is not None
        for row in named_units(predicted.frame, level, units).itertuples():
            assert row.concept == truth.name(level, row.unit)
        over_time = level_trends(run, DATED, level)  # Explore's Over time (one document a week)
        assert over_time.ids == units["unit"].tolist()
        assert all(over_time.names[c] == truth.name(level, unit) for c, unit in enumerate(over_time.ids))


def _check_feature_lists(run: LoadedRun, truth: Truth) -> None:
    """The features lists, search, similar features, diagnostics and every document's refraction."""
    shown = truth.labels["feature"]
    for frame in (ranked_features(run), search_features(run, ""), densest_features(run, len(run.features))):
        assert set(frame["feature_id"]) <= set(shown)
        assert all(shown[f] == label for f, label in zip(frame["feature_id"], frame["label"], strict=True))
    assert set(ranked_features(run)["feature_id"]) == set(shown)
    for feature in ranked_features(run).head(10)["feature_id"]:
        assert not set(nearest_active(run, int(feature))["feature_id"]) & truth.gone["feature"]
    for position in range(run.codes.shape[0]):
        refracted = refract_document(run, position)
        assert all(shown[f] == label for f, label in zip(refracted["feature_id"], refracted["label"], strict=True))


def _check_overview(run: LoadedRun, truth: Truth, documents: DatasetDocuments) -> None:
    """What the collection is about: themes, their sub-themes, families and features, unfit documents."""
    table = themes_table(run, documents, 2)
    assert set(table["theme"]) == set(truth.labels["theme"])
    assert dict(zip(table["theme"], table["label"], strict=True)) == truth.labels["theme"]
    families_counted = family_counts(run)
    assert sum(families_counted.values()) <= len(truth.labels["family"])
    subthemes = subthemes_table(run, documents, 1)
    assert set(subthemes["subtheme"]) <= set(truth.labels["subtheme"])
    assert set(subthemes["theme"]) <= set(truth.labels["theme"])
    for row in subthemes.itertuples():
        assert row.label == truth.labels["subtheme"][row.subtheme]
        main = run.subtheme_info.set_index("subtheme_id").at[row.subtheme, "features"][:3]
        assert not set(main) & truth.gone["feature"]
        assert row.features == " · ".join(truth.labels["feature"][int(f)] for f in main)
    for theme in truth.labels["theme"]:
        features = theme_features(run, theme)
        assert set(features["feature_id"]) <= set(truth.labels["feature"])
        pairs = zip(features["feature_id"], features["label"], strict=True)
        assert all(truth.labels["feature"][f] == label for f, label in pairs)
        families = theme_families_table(run, theme)
        assert set(families["family"]) <= set(truth.labels["family"])
        rows = zip(families["family"], families["label"], families["general concept"], strict=True)
        for family, label, parent in rows:
            assert label == truth.labels["family"][family]
            parent_id = next(f.parent for f in run.families if f.family_id == family)
            assert parent == truth.name("feature", parent_id)
    unfit = unfit_documents_table(run, documents, unfit_documents(run))
    shown_names = {truth.name("theme", t) for t in truth.labels["theme"]}
    assert set(unfit["closest_theme"]) <= shown_names
    for position in range(run.codes.shape[0]):
        assert {t for t, _ in document_theme_shares(run, position)} <= set(truth.labels["theme"])


def _check_export(workspace: Workspace, run: LoadedRun, truth: Truth, out: Path) -> None:
    """Every exported file holds the concepts shown, named as shown, counted as shown."""
    pipeline.export_run(workspace, run.record.run_id, out)
    features = pd.read_parquet(out / "features.parquet")
    assert dict(zip(features["feature_id"], features["label"], strict=True)) == truth.labels["feature"]
    assert set(features["family_id"].dropna().astype(int)) <= set(truth.labels["family"])
    assert set(features["theme_id"]) <= set(truth.labels["theme"]) | {-1}
    assert set(features["subtheme_id"]) <= set(truth.labels["subtheme"]) | {-1}
    activations = pd.read_parquet(out / "activations.parquet")
    assert set(activations["feature_id"]) <= set(truth.labels["feature"])
    csv = pd.read_csv(pd.io.common.StringIO(features_csv(out)))
    assert set(csv["feature_id"]) == set(truth.labels["feature"])
    themes = json.loads((out / "themes.json").read_text())
    assert {t["theme_id"]: t["label"] for t in themes} == truth.labels["theme"]
    for theme in themes:
        assert not set(theme["features"]) & truth.gone["feature"]
        for sub in theme["subthemes"]:
            assert truth.labels["subtheme"][sub["subtheme_id"]] == sub["label"]
            assert not set(sub["features"]) & truth.gone["feature"]
    families = json.loads((out / "families.json").read_text())
    assert {f["family_id"]: f["label"] for f in families} == truth.labels["family"]
    assert all(not set(f["members"]) & truth.gone["feature"] for f in families)
    documents = pd.read_parquet(out / "documents.parquet")
    assert set(documents["theme_id"]) <= set(truth.labels["theme"]) | {-1}
    assert {t for themes_of in documents["themes"] for t in themes_of} <= set(truth.labels["theme"])
    assert set(documents["subtheme_id"]) <= set(truth.labels["subtheme"]) | {-1}
    metrics = json.loads((out / "config.json").read_text())["metrics"]
    assert metrics["n_themes"] == len(truth.labels["theme"]) and metrics["n_families"] == len(truth.labels["family"])
    assert metrics["n_subthemes"] == len(truth.labels["subtheme"])


def _check_report(
    workspace: Workspace, run: LoadedRun, truth: Truth, trained: LoadedRun, map_points: pd.DataFrame
) -> None:
    """The report's numbers count what is shown; its themes, sub-themes, features and compared concepts are named
    as shown; no name of a concept left out appears on its page."""
    config = ReportConfig(level="feature")
    contents = gather(workspace, run, config, map_points)
    numbers = dict(sections.collection(contents).context["numbers"])
    in_use = sum(1 for f in truth.labels["feature"] if run.features.set_index("feature_id").at[f, "density"] > 0)
    assert numbers["Themes"] == f"{len(truth.labels['theme']):,}"
    assert numbers["Families of concepts"] == f"{len(truth.labels['family']):,}"
    assert numbers["Features (single concepts) in use"] == f"{in_use:,} of {len(truth.labels['feature']):,}"
    shown_features = {truth.name("feature", f) for f in truth.labels["feature"]}
    entries = sections.themes(contents).context["themes"]
    assert [entry.name for entry in entries] == [truth.name("theme", int(t)) for t in run.theme_info["theme_id"]]
    for entry in entries:
        assert set(entry.features) <= shown_features
        for child in entry.children:
            assert set(child.features) <= shown_features
            number = int(re.match(r"Sub-theme (\d+): ", child.name).group(1))
            assert child.name == truth.name("subtheme", number)
    for group in sections.comparison(contents).context["groups"]:
        assert {row["concept"] for row in group["rows"]} <= shown_features
    page = report_html(workspace, run, config, map_points)
    renamed = [e for e in run.edited.applied if e.action == "rename"]
    old_names = [Truth.of(trained, trained).name(e.level, e.target) for e in renamed]
    for name in truth.gone_names(trained) + old_names:
        assert str(escape(name)) + "<" not in page and str(escape(name)) + "\n" not in page, name


def _check_runs_compared(run: LoadedRun, truth: Truth) -> None:
    """Comparing the run's concepts with another run's (here itself) lists only the concepts shown."""
    table = carry.compare_runs(run, run, carry.match_runs(run, run))
    for level in ("theme", "family", "feature"):
        rows = table[table["level"] == level]
        assert not set(rows["new_id"].dropna().astype(int)) & truth.gone[level]
        labels = dict(zip(rows["new_id"].dropna().astype(int), rows["new_label"][rows["new_id"].notna()], strict=True))
        assert all(truth.labels[level][unit] == label for unit, label in labels.items())
