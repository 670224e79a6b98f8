from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import adjusted_rand_score

from prisma_core.concepts.themes import (
    NO_THEME,
    REPRODUCIBLE,
    ThemeConfig,
    _reproducible_fit,
    build_themes,
    max_themes,
    seed_clusters,
    themes_from_evidence,
)
from prisma_core.progress import ignore_progress
from prisma_core.sae import suggest_config
from prisma_core.sae.train import feature_codes, train_sae


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


def test_themes_hold_when_the_vectors_move_as_little_as_another_cpus_arithmetic(bbc_codes, bbc_embeddings):
    """int8 and bf16 vectors stay at cosine 0.996 and above to fp32 on average (BENCHMARKS.md section 20): themes built
    from vectors moved that much, with the same features, are the same themes."""
    noise = np.random.default_rng(0).normal(size=bbc_embeddings.shape).astype(np.float32)
    scale = 0.09 * np.linalg.norm(bbc_embeddings, axis=1, keepdims=True) / np.sqrt(bbc_embeddings.shape[1])
    moved = bbc_embeddings + noise * scale
    cosine = (
        np.sum(moved * bbc_embeddings, axis=1) / np.linalg.norm(moved, axis=1) / np.linalg.norm(bbc_embeddings, axis=1)
    )
    assert 0.99 < cosine.mean() < 0.998
    before, after = build_themes(bbc_codes, bbc_embeddings), build_themes(bbc_codes, moved)
    assert after.n_themes == before.n_themes
    assert adjusted_rand_score(before.strongest(), after.strongest()) >= 0.9


def blobs(n_blobs: int, spread: float, seed: int = 0) -> np.ndarray:
    """300 points around each of n_blobs random directions of a 50-dimensional space."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_blobs, 50))
    return np.concatenate([centre + spread * rng.normal(size=(300, 50)) for centre in centres]).astype(np.float32)


def test_a_number_of_themes_counts_only_where_its_grouping_comes_back():
    four = blobs(4, spread=0.3)
    _, agreement = _reproducible_fit(four, 4)
    assert agreement == pytest.approx(1.0)
    one = blobs(1, spread=1.0)
    _, arbitrary = _reproducible_fit(one, 6)  # a single cloud cut into six: each start cuts it elsewhere
    assert arbitrary < REPRODUCIBLE
    assignment, closeness = seed_clusters(four, [3, 4, 5, 6, 8], ignore_progress)
    assert assignment.max() + 1 == 4 and closeness.shape == (len(four), 4)
    truth = np.repeat(np.arange(4), 300)
    assert adjusted_rand_score(truth, assignment) == pytest.approx(1.0)


@pytest.mark.parametrize(("n_documents", "low", "high"), [(1_000, 10, 14), (100_000, 45, 50), (10, 4, 4)])
def test_the_automatic_range_grows_with_the_corpus(n_documents, low, high):
    assert low <= max_themes(n_documents) <= high


@pytest.mark.parametrize("settings", [{"n_themes": 1}, {"n_themes": 500}, {"member_share": 0}, {"member_share": 1.5}])
def test_invalid_theme_settings_are_refused(settings):
    with pytest.raises(ValueError):
        ThemeConfig(**settings)
