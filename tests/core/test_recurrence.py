"""Matching the features of two trainings by their activations over the same documents (prisma_core.sae.recurrence)."""

import numpy as np
import pytest
import scipy.sparse as sp

from prisma_core.sae.recurrence import RECURS_AT, activation_correlation, best_matches, matched_features, recurrence


def random_codes(n_documents: int, n_features: int, density: float, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    values = rng.random((n_documents, n_features)) * (rng.random((n_documents, n_features)) < density)
    return sp.csr_matrix(values.astype(np.float32))


def test_activation_correlation_is_pearsons_over_all_documents() -> None:
    a, b = random_codes(300, 12, 0.2, seed=0), random_codes(300, 9, 0.3, seed=1)
    dense_a, dense_b = a.toarray(), b.toarray()
    expected = np.corrcoef(dense_a.T, dense_b.T)[:12, 12:]
    np.testing.assert_allclose(activation_correlation(a, b), expected, atol=1e-9)


def test_a_feature_that_never_fires_correlates_with_nothing() -> None:
    a = random_codes(100, 4, 0.3, seed=2).tolil()
    a[:, 1] = 0
    correlation = activation_correlation(a.tocsr(), random_codes(100, 3, 0.3, seed=3))
    assert np.array_equal(correlation[1], np.zeros(3)) and np.isfinite(correlation).all()


def test_best_matches_find_a_permuted_copy() -> None:
    a = random_codes(200, 10, 0.2, seed=4)
    order = np.random.default_rng(5).permutation(10)
    match, value = best_matches(a, a[:, order])
    assert np.array_equal(order[match], np.arange(10))
    np.testing.assert_allclose(value, 1.0)


def test_matched_features_group_the_same_feature_across_trainings_once() -> None:
    shared = random_codes(400, 6, 0.2, seed=6)
    first = sp.hstack([shared, random_codes(400, 2, 0.2, seed=7)]).tocsr()  # 6 shared, 2 of its own
    order = np.array([5, 3, 7, 0, 1, 6, 2, 4])
    second = sp.hstack([shared, random_codes(400, 2, 0.2, seed=8)]).tocsr()[:, order]
    groups = matched_features([first, second])
    pairs = sorted((group[0], group[1]) for group in groups if len(group) == 2)
    assert pairs == [(f, int(np.flatnonzero(order == f)[0])) for f in range(6)]
    singles = sorted(next(iter(group.items())) for group in groups if len(group) == 1)
    own = sorted(int(np.flatnonzero(order == f)[0]) for f in (6, 7))
    assert singles == [(0, 6), (0, 7), (1, own[0]), (1, own[1])]
    for training, width in ((0, 8), (1, 8)):  # every feature in exactly one group
        assert sorted(group[training] for group in groups if training in group) == list(range(width))


def test_a_feature_split_in_two_matches_neither_half() -> None:
    whole = random_codes(500, 1, 0.4, seed=9).toarray()[:, 0]
    halves = np.zeros((500, 2), np.float32)
    rows = np.flatnonzero(whole)
    halves[rows[: len(rows) // 2], 0] = whole[rows[: len(rows) // 2]]
    halves[rows[len(rows) // 2 :], 1] = whole[rows[len(rows) // 2 :]]
    _, value = best_matches(sp.csr_matrix(whole[:, None]), sp.csr_matrix(halves))
    assert value[0] < RECURS_AT
    assert all(len(group) == 1 for group in matched_features([sp.csr_matrix(whole[:, None]), sp.csr_matrix(halves)]))


def test_recurrence_counts_firing_features_and_weighs_them_by_documents() -> None:
    shared = random_codes(300, 4, 0.5, seed=10)  # dense: 150 documents each
    rare = random_codes(300, 4, 0.05, seed=11)  # about 15 documents each, not shared
    first = sp.hstack([shared, rare, sp.csr_matrix((300, 2))]).tocsr()  # 2 features that never fire
    second = sp.hstack([shared, random_codes(300, 4, 0.05, seed=12)]).tocsr()
    found = recurrence([first, second])
    assert found.share == pytest.approx(0.5)  # 4 of 8 firing features, in both directions
    density = np.diff(first.tocsc().indptr)[:8]
    assert found.share_by_documents == pytest.approx(density[:4].sum() / density.sum(), abs=0.02)
    assert found.share_by_documents > 0.85
