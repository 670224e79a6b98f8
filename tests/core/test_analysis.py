import numpy as np
import pytest
import scipy.sparse as sp
from toy_codes import toy_codes

from prisma_core.concepts import analysis


@pytest.fixture
def codes():
    return toy_codes()


def test_codes_matrix_holds_exactly_the_topk_values(codes):
    assert codes.shape == (6, 4)
    assert np.diff(codes.indptr).tolist() == [2] * 6
    assert codes[1, 2] == pytest.approx(0.3)
    assert codes[4, 0] == 0


def test_codes_from_rows_equals_codes_matrix(codes):
    coo = codes.tocoo()
    rebuilt = analysis.codes_from_rows(coo.row, coo.col, coo.data, 6, 4)
    assert (rebuilt != codes).nnz == 0


def test_feature_stats(codes):
    stats = analysis.feature_stats(codes)
    assert stats["density"].tolist() == [3, 4, 3, 2]
    assert stats["density_fraction"].tolist() == pytest.approx([0.5, 4 / 6, 0.5, 2 / 6])
    assert stats.loc[0, "mean_activation"] == pytest.approx((0.9 + 0.8 + 0.7) / 3)
    assert stats["max_activation"].tolist() == pytest.approx([0.9, 0.5, 0.6, 0.6])


def test_top_and_zero_documents(codes):
    top = analysis.top_documents(codes, 0, n=2)
    assert top["position"].tolist() == [0, 1]
    assert top["value"].tolist() == pytest.approx([0.9, 0.8])
    zero = analysis.zero_documents(codes, 0, n=10)
    assert zero.tolist() == [2, 4, 5]
    positions, _ = analysis.feature_column(codes, 3)
    assert sorted(positions.tolist()) == [4, 5]


def test_nearest_features_by_decoder_cosine():
    directions = np.array([[1, 0], [0.8, 0.6], [0, 1], [-1, 0]], dtype=np.float32)
    nearest = analysis.nearest_features(directions, 0, n=3)
    assert nearest["feature_id"].tolist() == [1, 2, 3]
    assert nearest["cosine"].tolist() == pytest.approx([0.8, 0.0, -1.0])
    similarity = analysis.decoder_similarity(directions, [0, 3])
    np.testing.assert_allclose(similarity, [[1, -1], [-1, 1]], atol=1e-6)


def test_cooccurrence_is_conditional_probability(codes):
    matrix = analysis.cooccurrence(codes, [0, 1])
    # feature 0 active on docs 0,1,3; feature 1 on 0,2,3,5; together on 0,3
    np.testing.assert_allclose(matrix, [[1, 2 / 3], [2 / 4, 1]], atol=1e-6)


def test_document_features_strongest_first(codes):
    frame = analysis.document_features(codes, 2)
    assert frame["feature_id"].tolist() == [1, 2]
    assert frame["value"].tolist() == pytest.approx([0.5, 0.4])


def test_concept_query_and_not_with_thresholds(codes):
    assert analysis.concept_query(codes, must={0: 0}).tolist() == [0, 1, 3]
    assert analysis.concept_query(codes, must={0: 0}, must_not={1: 0}).tolist() == [1]
    assert analysis.concept_query(codes, must={0: 0.75}).tolist() == [0, 1]
    assert analysis.concept_query(codes, must={1: 0}, must_not={1: 0.3}).tolist() == [0, 3, 5]
    assert analysis.concept_query(codes).tolist() == list(range(6))


def test_an_activation_is_strong_from_a_quarter_of_its_documents_largest_everywhere():
    """One rule (`analysis.strong_activations`) for the strong codes, the label scores' documents and refraction."""
    values = np.array([1.0, 0.3, 0.2, 0.25])
    assert analysis.strong_activations(values, values.max()).tolist() == [True, True, False, True]
    assert analysis.strong_activations(values, np.array([1.0, 1.0, 0.5, 2.0])).tolist() == [True, True, True, False]
    codes = sp.csr_matrix(np.array([[1.0, 0.3, 0.2, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 4.0, 0.0, 0.9]], np.float32))
    np.testing.assert_allclose(
        analysis.strong_codes(codes).toarray(),
        [[1.0, 0.3, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 4.0, 0.0, 0.0]],
    )
    np.testing.assert_array_equal(analysis.strong_density(codes), [1, 2, 0, 0])
