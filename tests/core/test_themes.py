from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import adjusted_rand_score

from prisma_core.sae import suggest_config
from prisma_core.sae.train import feature_codes, train_sae
from prisma_core.themes import NO_THEME, ThemeConfig, build_themes, max_themes, themes_from_evidence


@pytest.fixture(scope="module")
def bbc_codes(bbc_embeddings) -> sp.csr_matrix:
    """Codes of the SAE trained with the settings suggested for all BBC embeddings, on those embeddings."""
    result = train_sae(bbc_embeddings, suggest_config(*bbc_embeddings.shape))
    return feature_codes(result.model, bbc_embeddings)


def best_f1(members: sp.spmatrix, categories: np.ndarray) -> float:
    member = sp.csc_matrix(members, dtype=bool)
    scores = []
    for category in np.unique(categories):
        truth = categories == category
        scores.append(
            max(
                2 * truth[member[:, t].indices].sum() / (truth.sum() + member[:, t].nnz) for t in range(member.shape[1])
            )
        )
    return float(np.mean(scores))


def test_themes_recover_the_bbc_desks(bbc, bbc_codes, bbc_embeddings):
    themes = build_themes(bbc_codes, bbc_embeddings)
    categories = bbc["label"].to_numpy()
    assert 3 <= themes.n_themes <= max_themes(len(bbc))
    strongest = themes.strongest()
    assert (strongest != NO_THEME).all()
    one_each = sp.csr_matrix((np.ones(len(strongest)), (np.arange(len(strongest)), strongest)))
    assert best_f1(one_each, categories) >= 0.85
    sizes = np.bincount(strongest, minlength=themes.n_themes)
    assert (np.diff(sizes) <= 0).all(), "theme 0 is the largest"
    np.testing.assert_allclose(themes.probabilities.sum(axis=1), 1.0, rtol=1e-5)


def test_a_theme_is_explained_by_its_features(bbc_codes, bbc_embeddings):
    themes = build_themes(bbc_codes, bbc_embeddings, ThemeConfig(n_themes=5))
    feature_theme = themes.feature_theme()
    fires = np.diff(bbc_codes.tocsc().indptr) > 0
    assert (feature_theme[~fires] == NO_THEME).all()
    assert set(feature_theme[fires]) <= set(range(5)) | {NO_THEME}
    # A document's strongest theme is, nearly always, the one its own features vote for, weighted by their
    # activations; where the vote is close, the document's position decides.
    votes = np.asarray(bbc_codes @ themes.evidence)
    assert (votes.argmax(axis=1) == themes.strongest()).mean() >= 0.9
    members = themes.members()
    assert (members[np.arange(members.shape[0]), themes.strongest()] == 1).all()


def test_the_number_of_themes_changes_without_retraining_and_is_reproducible(bbc_codes, bbc_embeddings):
    eight = build_themes(bbc_codes, bbc_embeddings, ThemeConfig(n_themes=8))
    again = build_themes(bbc_codes, bbc_embeddings, ThemeConfig(n_themes=8))
    assert eight.n_themes == 8
    np.testing.assert_array_equal(eight.evidence, again.evidence)
    np.testing.assert_array_equal(eight.probabilities, again.probabilities)
    # Themes stored before the documents' probabilities were are read from the features' vote alone: nearly the same.
    restored = themes_from_evidence(bbc_codes, eight.evidence, eight.member_share, eight.fit_share)
    assert (restored.strongest() == eight.strongest()).mean() >= 0.85


def test_themes_agree_when_the_sae_is_trained_with_another_seed(bbc_codes, bbc_embeddings):
    other = train_sae(bbc_embeddings, replace(suggest_config(*bbc_embeddings.shape), seed=1))
    first = build_themes(bbc_codes, bbc_embeddings).strongest()
    second = build_themes(feature_codes(other.model, bbc_embeddings), bbc_embeddings).strongest()
    assert adjusted_rand_score(first, second) >= 0.9


@pytest.mark.parametrize(("n_documents", "low", "high"), [(1_000, 10, 14), (100_000, 45, 50), (10, 4, 4)])
def test_the_automatic_range_grows_with_the_corpus(n_documents, low, high):
    assert low <= max_themes(n_documents) <= high


@pytest.mark.parametrize("settings", [{"n_themes": 1}, {"n_themes": 500}, {"member_share": 0}, {"member_share": 1.5}])
def test_invalid_theme_settings_are_refused(settings):
    with pytest.raises(ValueError):
        ThemeConfig(**settings)
