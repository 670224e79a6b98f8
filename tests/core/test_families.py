import numpy as np
import pytest
import scipy.sparse as sp

from prisma_core.concepts.families import (
    CHANCE_SPREAD,
    Family,
    FamilyConfig,
    cooccurrence_edges,
    feature_density,
    find_families,
)
from prisma_core.progress import Progress

N_PARENTS = 5
CHILDREN_PER_PARENT = 3
N_NOISE = 10
N_PLANTED = N_PARENTS * (1 + CHILDREN_PER_PARENT) + N_NOISE

PAIRS = FamilyConfig(min_family_size=2)
"""The SPEC's algorithm on small hand-made codes, where a family may be a parent and one child."""


def children_of(parent: int) -> list[int]:
    first = N_PARENTS + CHILDREN_PER_PARENT * parent
    return list(range(first, first + CHILDREN_PER_PARENT))


def to_codes(active: np.ndarray, rng: np.random.Generator) -> sp.csr_matrix:
    """Sparse activation values (uniform in [0.1, 2]) wherever the boolean `active` [docs, features] is set."""
    values = rng.uniform(0.1, 2.0, size=active.shape).astype(np.float32)
    return sp.csr_matrix(np.where(active, values, np.float32(0)))


def codes_from_documents(documents: list[list[int]], n_features: int) -> sp.csr_matrix:
    """One row per document, value 1 on each listed feature."""
    active = np.zeros((len(documents), n_features), dtype=bool)
    for row, features in enumerate(documents):
        active[row, features] = True
    return to_codes(active, np.random.default_rng(0))


def planted_hierarchy(seed: int = 0, n_docs: int = 20_000) -> sp.csr_matrix:
    """Features 0-4 are parents (each on ~4% of documents, never together); features 5-19 are their children
    (3 per parent, each on half of its parent's documents and never without it); features 20-29 are noise
    on 2% of all documents. Children of one parent co-occur (weight ~0.5), so the graph has cycles."""
    rng = np.random.default_rng(seed)
    active = np.zeros((n_docs, N_PLANTED), dtype=bool)
    topic = np.where(rng.random(n_docs) < 0.2, rng.integers(0, N_PARENTS, n_docs), -1)
    for parent in range(N_PARENTS):
        on_parent = topic == parent
        active[on_parent, parent] = True
        for child in children_of(parent):
            active[on_parent & (rng.random(n_docs) < 0.5), child] = True
    active[:, N_PLANTED - N_NOISE :] = rng.random((n_docs, N_NOISE)) < 0.02
    return to_codes(active, rng)


@pytest.fixture(scope="module")
def planted() -> sp.csr_matrix:
    return planted_hierarchy()


def dense_reference_edges(
    codes: sp.csr_matrix, tau: float, min_shared: int = 1
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    active = (codes.toarray() > 0).astype(np.float64)
    together = active.T @ active
    density = active.sum(axis=0)
    weight = together / (np.minimum(density[:, None], density[None, :]) + 1e-9)
    chance = np.outer(density, density) / len(active)
    above_chance = together > chance + CHANCE_SPREAD * np.sqrt(chance)
    i, j = np.nonzero(np.triu((together >= min_shared) & (weight >= tau) & above_chance, k=1))
    return i, j, weight[i, j]


def test_planted_parents_are_roots_of_their_children(planted: sp.csr_matrix) -> None:
    families = find_families(planted, FamilyConfig(iterations=1))

    assert [family.parent for family in families] == list(range(N_PARENTS))
    for family in families:
        assert family.family_id == family.parent
        assert family.iteration == 0
        assert family.members == [family.parent, *children_of(family.parent)]
        assert [(parent, child) for parent, child, _ in family.edges] == [
            (family.parent, child) for child in children_of(family.parent)
        ]
        assert all(weight == pytest.approx(1.0) for _, _, weight in family.edges)


def test_spanning_forest_keeps_parent_edges_over_weaker_sibling_edges(planted: sp.csr_matrix) -> None:
    i, j, weight = cooccurrence_edges(planted, tau=0.1)
    edges = dict(zip(zip(i.tolist(), j.tolist(), strict=True), weight.tolist(), strict=True))
    first, second, _ = children_of(0)
    assert edges[(first, second)] == pytest.approx(0.5, abs=0.05)
    assert edges[(0, first)] == pytest.approx(1.0)
    noise = range(N_PLANTED - N_NOISE, N_PLANTED)
    assert not any(a in noise or b in noise for a, b in edges)

    first_round = [family for family in find_families(planted) if family.iteration == 0]
    tree_edges = {(parent, child) for family in first_round for parent, child, _ in family.edges}
    assert (first, second) not in tree_edges and (second, first) not in tree_edges


def test_edges_point_from_denser_to_sparser_feature_and_ties_go_to_lower_id() -> None:
    documents = [[1, 3]] * 4 + [[3]] * 6 + [[5, 6]] * 5 + [[0]] * 3 + [[2]] * 60  # 2: the rest of the collection
    codes = codes_from_documents(documents, n_features=7)

    families = find_families(codes, PAIRS)

    assert families == [
        Family(family_id=0, iteration=0, parent=3, members=[3, 1], edges=[(3, 1, pytest.approx(1.0))]),
        Family(family_id=1, iteration=0, parent=5, members=[5, 6], edges=[(5, 6, pytest.approx(1.0))]),
    ]


def test_feature_implied_by_two_denser_features_belongs_to_both_families() -> None:
    # 2 fires only with both 0 and 1 (weight 1 to each); 0 and 1 are more loosely linked (3 / 8).
    documents = [[0, 1, 2]] * 3 + [[0]] * 7 + [[1]] * 5 + [[3]] * 60  # 3: the rest of the collection
    codes = codes_from_documents(documents, n_features=4)

    families = find_families(codes, PAIRS)

    assert [(family.parent, family.members) for family in families] == [(0, [0, 2]), (1, [1, 2])]


def test_threshold_drops_weak_edges() -> None:
    # Features 0 and 1 are each active on 10 of 217 documents and share 3: weight 3 / min(10, 10) = 0.3, and 3 is
    # well above the 10 * 10 / 217 = 0.46 documents two independent features would share.
    documents = [[0]] * 7 + [[0, 1]] * 3 + [[1]] * 7 + [[2]] * 200
    codes = codes_from_documents(documents, n_features=3)

    i, j, weight = cooccurrence_edges(codes, tau=0.1)
    assert (i.tolist(), j.tolist()) == ([0], [1])
    assert weight[0] == pytest.approx(0.3)
    assert find_families(codes, FamilyConfig(tau=0.1, min_family_size=2))[0].members == [0, 1]

    assert len(cooccurrence_edges(codes, tau=0.35)[0]) == 0
    assert find_families(codes, FamilyConfig(tau=0.35, min_family_size=2)) == []


def test_a_pair_that_fires_together_by_chance_or_on_too_few_documents_is_no_family() -> None:
    """A dense feature (0, on half the documents) beside a sparse one (1) about as often as chance would put it:
    weight 0.5, above tau, but no relation. A pair sharing two documents only (2 and 3): a coincidence."""
    rng = np.random.default_rng(0)
    dense = rng.random(400) < 0.5
    sparse = rng.random(400) < 0.05
    documents = [[f for f, on in ((0, d), (1, s)) if on] for d, s in zip(dense, sparse, strict=True)]
    documents += [[2, 3]] * 2 + [[2]] * 3 + [[3]] * 3
    codes = codes_from_documents(documents, n_features=4)
    together = int((dense & sparse).sum())
    assert together / sparse.sum() >= 0.1 and together <= dense.sum() * sparse.sum() / len(documents) * 1.2

    i, j, _ = cooccurrence_edges(codes, tau=0.1, min_shared=3)
    assert not {(int(a), int(b)) for a, b in zip(i, j, strict=True)} & {(0, 1), (2, 3)}
    assert find_families(codes, FamilyConfig(min_family_size=2)) == []
    assert (2, 3) in set(zip(*cooccurrence_edges(codes, tau=0.1, min_shared=2)[:2], strict=True))


def test_no_cooccurrence_gives_no_families() -> None:
    disjoint = codes_from_documents([[0], [1], [2], [0], [3]], n_features=5)
    assert find_families(disjoint) == []
    assert find_families(sp.csr_matrix((0, 8), dtype=np.float32)) == []


def test_second_round_surfaces_grandchild_family_once_parent_is_removed() -> None:
    # 0 is the parent; 1 and 2 are its children; 3 and 4 are children of 1 only (0's grandchildren); 5 is elsewhere.
    documents = [[0]] * 40 + [[0, 2]] * 10 + [[0, 1]] * 8 + [[0, 1, 3]] * 6 + [[0, 1, 4]] * 4 + [[5]] * 100
    codes = codes_from_documents(documents, n_features=6)

    families = find_families(codes, FamilyConfig(iterations=3, min_family_size=2))

    assert [(family.family_id, family.iteration, family.parent) for family in families] == [(0, 0, 0), (1, 1, 1)]
    assert set(families[0].members) == {0, 1, 2, 3, 4}
    assert families[0].members[0] == 0
    assert families[1].members == [1, 3, 4]
    assert [(parent, child) for parent, child, _ in families[1].edges] == [(1, 3), (1, 4)]


def test_families_are_deterministic_and_ignore_document_order(planted: sp.csr_matrix) -> None:
    shuffled = planted[np.random.default_rng(1).permutation(planted.shape[0])]

    first = find_families(planted)
    assert find_families(planted) == first
    assert find_families(shuffled) == first
    assert [family.family_id for family in first] == list(range(len(first)))


def test_blocked_cooccurrence_matches_dense_reference() -> None:
    rng = np.random.default_rng(3)
    codes = to_codes(rng.random((400, 60)) < 0.08, rng)
    expected = dense_reference_edges(codes, tau=0.15)

    for block_entries, block_pairs in [(1_000_000, 1_000_000), (200, 50), (1, 1)]:
        i, j, weight = cooccurrence_edges(codes, 0.15, block_entries=block_entries, block_pairs=block_pairs)
        assert i.tolist() == expected[0].tolist()
        assert j.tolist() == expected[1].tolist()
        np.testing.assert_allclose(weight, expected[2])
    shared = dense_reference_edges(codes, tau=0.15, min_shared=7)
    i, j, weight = cooccurrence_edges(codes, 0.15, min_shared=7, block_entries=200, block_pairs=50)
    assert (i.tolist(), j.tolist()) == (shared[0].tolist(), shared[1].tolist()) and len(i) < len(expected[0])


def test_density_counts_positive_activations_only() -> None:
    codes = sp.csr_matrix(
        (np.array([0.5, 0.0, 1.0, 2.0], dtype=np.float32), np.array([0, 1, 1, 2]), np.array([0, 2, 4])),
        shape=(2, 4),
    )
    assert feature_density(codes).tolist() == [1, 1, 1, 0]


def test_progress_reports_cooccurrence_then_each_round(planted: sp.csr_matrix) -> None:
    reports: list[Progress] = []
    find_families(planted, FamilyConfig(iterations=2), progress=reports.append)

    assert [(report.stage, report.done, report.total) for report in reports] == [
        ("families", step, 3) for step in range(4)
    ]
    assert reports[2].metrics["families"] == N_PARENTS


def test_invalid_inputs_are_rejected() -> None:
    with pytest.raises(ValueError, match="tau"):
        FamilyConfig(tau=1.5)
    with pytest.raises(ValueError, match="iterations"):
        FamilyConfig(iterations=0)
    with pytest.raises(ValueError, match="min_family_size"):
        FamilyConfig(min_family_size=1)
    with pytest.raises(TypeError, match="sparse"):
        find_families(np.ones((3, 3)))


def topk_codes_with_topics(n_docs: int, n_features: int, k: int, seed: int) -> sp.csr_matrix:
    """k active features per document: 2 of 64 topic parents, 2 of each chosen topic's 4 children, and
    k - 6 features drawn from the remaining ones."""
    rng = np.random.default_rng(seed)
    n_topics, n_children = 64, 4
    topics = np.argsort(rng.random((n_docs, n_topics)), axis=1)[:, :2]
    picks = np.argsort(rng.random((n_docs, 2, n_children)), axis=2)[:, :, :2]
    children = (n_topics + topics[:, :, None] * n_children + picks).reshape(n_docs, -1)
    first_free = n_topics * (1 + n_children)
    fill = np.stack([rng.choice(n_features - first_free, size=k - 6, replace=False) for _ in range(n_docs)])
    indices = np.sort(np.concatenate([topics, children, fill + first_free], axis=1), axis=1)
    values = rng.uniform(0.05, 3.0, size=indices.size).astype(np.float32)
    return sp.csr_matrix((values, indices.ravel(), np.arange(0, indices.size + 1, k)), shape=(n_docs, n_features))


def test_scale_check_topk_codes() -> None:
    """A sanity run at a realistic shape (3,072 features, 20,000 documents, k = 32), not a timing test."""
    codes = topk_codes_with_topics(n_docs=20_000, n_features=3_072, k=32, seed=0)
    assert (np.diff(codes.indptr) == 32).all()
    density = feature_density(codes)
    config = FamilyConfig()

    families = find_families(codes, config)

    assert [family.family_id for family in families] == list(range(len(families)))
    for family in families:
        assert family.members[0] == family.parent
        assert len(set(family.members)) == len(family.members) >= config.min_family_size
        for parent, child, weight in family.edges:
            assert density[parent] >= density[child]
            assert config.tau <= weight <= 1.0
    first_round = {family.parent: family for family in families if family.iteration == 0}
    for topic in range(64):
        topic_children = range(64 + 4 * topic, 68 + 4 * topic)
        assert set(topic_children) <= set(first_round[topic].members)
