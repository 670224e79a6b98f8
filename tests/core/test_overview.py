"""The theme queries of the read model (`prisma_core.reading.overview`) that the app's theme views render, on the small
real run (60 BBC articles through the pipeline)."""

from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from prisma_core import pipeline
from prisma_core.concepts.themes import NO_THEME
from prisma_core.names import NO_THEME_NAME
from prisma_core.reading.explore import DatasetDocuments
from prisma_core.reading.overview import (
    THEMES_WITHOUT_ANY,
    document_theme_shares,
    families_of_themes,
    family_counts,
    regroup_counts,
    shown_theme,
    theme_families,
    theme_families_table,
    theme_features,
    theme_name,
    unfit_documents_table,
)
from prisma_core.reading.runs import document_themes
from prisma_core.store import Workspace


@pytest.fixture(scope="module")
def run(small_run):
    return pipeline.load_run(Workspace(small_run.path), small_run.run.run_id)


@pytest.fixture(scope="module")
def documents(small_run, run):
    return DatasetDocuments.open(Workspace(small_run.path), run.record.dataset_id)


def test_a_theme_is_named_by_its_number_and_label(run):
    for info in run.theme_info.itertuples():
        assert theme_name(run, info.theme_id) == f"Theme {info.theme_id}: {info.label}"
    assert theme_name(run, NO_THEME) == NO_THEME_NAME == "(no theme)"


def test_the_open_theme_is_the_one_chosen_while_the_run_shows_it_else_the_first(run):
    shown = run.theme_info["theme_id"].tolist()
    assert shown_theme(run, shown[-1]) == shown[-1]
    assert shown_theme(run, None) == shown[0] == shown_theme(run, 999)
    assert shown_theme(replace(run, theme_info=run.theme_info.iloc[:0]), 3) == 0


def meets_in_theme(run, family, theme: int) -> int:
    """Documents of the theme where the family's parent fires with one of its children."""
    active = run.codes.toarray() > 0
    in_theme = run.themes.members().toarray()[:, theme] > 0
    children = [m for m in family.members if m != family.parent]
    return int((active[:, family.parent] & active[:, children].any(axis=1) & in_theme).sum())


def test_families_are_counted_and_listed_under_the_theme_of_their_general_concept(run):
    theme_of = dict(zip(run.features["feature_id"], run.features["theme_id"], strict=True))
    shared = run.settings.families.min_shared
    expected = Counter(
        int(theme_of[f.parent]) for f in run.families if meets_in_theme(run, f, int(theme_of[f.parent])) >= shared
    )
    counts = family_counts(run)
    assert list(counts) == run.theme_info["theme_id"].tolist()
    assert counts == {t: expected.get(t, 0) for t in counts}
    for theme_id in counts:
        table = theme_families_table(run, theme_id)
        families = theme_families(run, theme_id)
        assert table.columns.tolist() == ["family", "label", "features", "general concept"]
        assert table["family"].tolist() == [f.family_id for f in families]
        assert table["features"].tolist() == [len(f.members) for f in families]
        assert (np.diff(table["features"].to_numpy()) <= 0).all(), "largest first"
        assert all(name.startswith(f"#{f.parent} ") for name, f in zip(table["general concept"], families, strict=True))
        assert all(meets_in_theme(run, f, theme_id) >= shared for f in families)


def test_a_family_whose_members_meet_outside_the_theme_of_its_parent_is_not_listed_there(run):
    """A family made of a theme's feature and a feature that never fires on that theme's documents (the issue's
    "carbon nanotubes" under "star formation"): the theme does not list it."""
    theme = int(run.theme_info["theme_id"].iloc[0])
    parent = int(run.theme_info["features"].iloc[0][0])
    in_theme = run.themes.members().toarray()[:, theme] > 0
    active = run.codes.toarray() > 0
    elsewhere = [f for f in range(active.shape[1]) if active[:, f].any() and not (active[:, f] & in_theme).any()]
    assert elsewhere, "some feature fires only outside the theme"
    odd = replace(run.families[0], family_id=999, parent=parent, members=[parent, elsewhere[0]], edges=[])
    with_odd = replace(run, families=[*run.families, odd])
    assert 999 not in [f.family_id for f in theme_families(with_odd, theme)]
    assert 999 in [f.family_id for f in families_of_themes(with_odd)[NO_THEME]]


def test_a_themes_features_come_most_typical_first_with_their_sizes(run):
    for info in run.theme_info.itertuples():
        table = theme_features(run, info.theme_id)
        assert table.columns.tolist() == ["feature_id", "label", "density"]
        assert table["feature_id"].tolist() == [int(f) for f in info.features]
        by_id = run.features.set_index("feature_id")
        assert table["density"].tolist() == by_id.loc[list(info.features), "density"].tolist()
        assert (run.features.set_index("feature_id").loc[list(info.features), "theme_id"] == info.theme_id).all()


def test_documents_that_fit_no_theme_well_are_listed_with_their_closest_theme(run, documents):
    positions = np.array([5, 0, 17])
    table = unfit_documents_table(run, documents, positions)
    assert table["doc_id"].tolist() == documents.at(positions)["doc_id"].tolist()
    closest = run.themes.strongest()[positions]
    assert table["closest_theme"].tolist() == [theme_name(run, t) for t in closest]
    np.testing.assert_allclose(table["closest_share"], run.themes.probabilities[positions].max(axis=1))
    assert ((table["closest_share"] > 0) & (table["closest_share"] <= 1)).all()


def test_a_documents_themes_come_most_probable_first(run):
    listed = document_themes(run)
    members = run.themes.members()
    for position in range(run.codes.shape[0]):
        shares = document_theme_shares(run, position)
        themes = [t for t, _ in shares]
        assert sorted(themes) == sorted(members[position].indices.tolist())
        assert themes == listed.at[position, "themes"]
        assert [s for _, s in shares] == sorted((s for _, s in shares), reverse=True)
        if shares:
            assert themes[0] == run.themes.strongest()[position]
            assert shares[0][1] == pytest.approx(run.themes.probabilities[position].max())
    assert document_theme_shares(replace(run, themes=None), 0) == []


def test_a_run_is_regrouped_between_two_themes_and_one_per_document(run):
    counts = regroup_counts(run)
    assert counts.current == len(run.theme_info) == run.themes.n_themes
    assert regroup_counts(replace(run, theme_info=run.theme_info.head(1))).current == 2  # every theme merged into one
    assert counts.most_themes == counts.most_subthemes == 60  # one per document, below the settings' limits
    assert regroup_counts(replace(run, themes=None)).current == THEMES_WITHOUT_ANY
    tiny = replace(run, themes=None, codes=run.codes[:1])
    assert (regroup_counts(tiny).current, regroup_counts(tiny).most_themes) == (1, 2)
