"""Feature families (SPEC section 6): parent/child trees of features found from sparse co-occurrence.

A general parent feature fires on most documents where its specialised children fire. Counting co-occurrences
on the sparse codes (k active features per document) and keeping the strongest relations as a maximum spanning
forest recovers these trees without ever building a dense documents x features or features x features matrix.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import minimum_spanning_tree

from prisma_core.config_docs import CheckedConfig, setting
from prisma_core.progress import Progress, ProgressCallback, ignore_progress
from prisma_core.store import Family

if TYPE_CHECKING:  # networkx (0.15 s) is imported where families are found: every view reads FamilyConfig
    import networkx as nx

_EPS = 1e-9
CHANCE_SPREAD = 1.0
"""A pair fires together more often than chance when its count exceeds the count two independent features would
share (f_i f_j / n_documents) by this many standard deviations of that count (a Poisson count's: its square root)."""
_STAGE = "families"
_BLOCK_ENTRIES = 8_000_000
_BLOCK_PAIRS = 8_000_000


@dataclass(frozen=True)
class FamilyConfig(CheckedConfig):
    settings_name = "family"

    tau: float = setting(
        0.1,
        label="How tightly members go together (τ)",
        minimum=0.0,
        maximum=1.0,
        step=0.01,
        slider=True,
        help="How often a child feature must fire together with its parent to join its family, from 0 to 1. "
        "Higher gives fewer, tighter families; lower gives larger, looser ones.",
        doc="Drop feature pairs whose normalised co-occurrence (see `cooccurrence_edges`) is below this, in [0, 1].",
    )
    iterations: int = setting(
        3,
        label="Rounds",
        minimum=1,
        maximum=10,
        help="Rounds of family building. After each round the parents found are set aside and families are looked "
        "for again among the other features, which finds finer families.",
        doc='Rounds of "find families, remove their parents, rebuild the forest on the remaining features".',
    )
    min_family_size: int = setting(
        3,
        label="Smallest family",
        minimum=2,
        maximum=100,
        help="The smallest family shown, parent included: 2 means a parent with at least one child.",
        doc="Smallest family reported, parent included (3 = a parent and at least two children; lone pairs "
        "would flood the list). The parents of smaller families are still removed before the next round.",
    )
    min_shared: int = setting(
        3,
        label="Documents shared",
        minimum=1,
        maximum=1000,
        help="How many documents a child feature must share with its parent to join its family: one or two shared "
        "documents are a coincidence, not a relation.",
        doc="Fewest documents a pair of features must fire on together to be linked (see `cooccurrence_edges`).",
    )


def feature_density(codes: sp.spmatrix | sp.sparray) -> np.ndarray:
    """Number of documents on which each feature is active (value > 0). codes: [n_documents, n_features]
    -> [n_features] int64."""
    active = _binary_activity(codes)
    return np.bincount(active.indices, minlength=active.shape[1]).astype(np.int64)


def cooccurrence_edges(
    codes: sp.spmatrix | sp.sparray,
    tau: float,
    density: np.ndarray | None = None,
    *,
    min_shared: int = 1,
    block_entries: int = _BLOCK_ENTRIES,
    block_pairs: int = _BLOCK_PAIRS,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Feature pairs (i, j), i < j, whose co-occurrence weight is at least tau, that fire together on at least
    `min_shared` documents and more often than chance, sorted by (i, j).

    The SPEC's C_norm_ij = C_ij / (f_i + eps) ~ P(j | i) is asymmetric; the undirected weight of a pair is
    w_ij = max(C_norm_ij, C_norm_ji) = C_ij / (min(f_i, f_j) + eps): how strongly the sparser feature implies
    the denser one. That is the parent-child signal: a child fires almost only with its parent, so w ~ 1 even
    though the parent fires mostly without that particular child. A dense feature (on 30% of documents) is
    found beside any other about 30% of the time by chance alone, above tau: a pair must also fire together more
    often than two independent features would (C_ij above f_i f_j / n_documents by CHANCE_SPREAD standard
    deviations), and on `min_shared` documents or
    more (a document or two in common is a coincidence: a "gamma rays" parent with a "decoding" child).

    C = AᵀA (A = binary activity) is counted from each document's pairs of active features, one block of
    features at a time: at most about `block_entries` counts and `block_pairs` pairs are held at once, and a
    block is thresholded before the next one. `density` (from `feature_density`) saves a recount.
    codes: [n_documents, n_features] -> (i [E] int64, j [E] int64, weight [E] float64).
    """
    n_features = codes.shape[1]
    density = feature_density(codes) if density is None else np.asarray(density)
    if density.shape != (n_features,):
        raise ValueError(f"density has shape {density.shape}, expected ({n_features},)")
    # Features are renamed by rank of decreasing density: in every counted pair (rank i < rank j) the second
    # feature is the sparser one, so min(f_i, f_j) = f_j and each block is thresholded column by column.
    by_rank = np.argsort(-density, kind="stable")
    ranked = _ranked_activity(_binary_activity(codes), by_rank)  # the activity's own indices are not kept
    ranked_density = density[by_rank]
    later = _later_in_document(ranked)
    entries = _entries_by_feature(ranked)
    pairs = np.bincount(ranked.indices, weights=later, minlength=n_features).astype(np.int64)
    linked = _Linked(ranked_density, codes.shape[0], tau, max(int(min_shared), 1))
    found = [
        linked.edges(_block_counts(ranked, entries, later, start, stop, block_pairs), start)
        for start, stop in _feature_blocks(pairs, block_entries, block_pairs)
    ]
    i = by_rank[np.concatenate([rows for rows, _, _ in found])] if found else np.empty(0, np.int64)
    j = by_rank[np.concatenate([cols for _, cols, _ in found])] if found else np.empty(0, np.int64)
    weight = np.concatenate([weights for _, _, weights in found]) if found else np.empty(0, np.float64)
    i, j = np.minimum(i, j), np.maximum(i, j)
    order = np.lexsort((j, i))
    return i[order], j[order], weight[order]


def find_families(
    codes: sp.spmatrix | sp.sparray,
    config: FamilyConfig = FamilyConfig(),
    progress: ProgressCallback = ignore_progress,
) -> list[Family]:
    """Families of features over `config.iterations` rounds; ids are sequential in (round, parent id) order.

    Each round builds the maximum spanning forest of the thresholded co-occurrence graph on the features left,
    orients it from denser to sparser features and reports one family per root; the roots are then removed.
    A feature whose tree neighbours are both denser than itself belongs to both of their families.
    codes: [n_documents, n_features] sparse activations.
    """
    total = config.iterations + 1
    progress(Progress(_STAGE, 0, total, "Counting feature co-occurrences"))
    density = feature_density(codes)
    i, j, weight = cooccurrence_edges(codes, config.tau, density, min_shared=config.min_shared)
    progress(
        Progress(
            _STAGE,
            1,
            total,
            f"{len(weight):,} feature pairs co-occur with weight >= {config.tau}",
            {"edges": len(weight)},
        )
    )
    removed = np.zeros(len(density), dtype=bool)
    families: list[Family] = []
    for iteration in range(config.iterations):
        kept = ~(removed[i] | removed[j])
        tree = _oriented_forest(i[kept], j[kept], weight[kept], density)
        roots = _roots(tree)
        removed[roots] = True
        found = _families_of_round(tree, roots, iteration, len(families), config.min_family_size)
        families.extend(found)
        progress(
            Progress(
                _STAGE,
                iteration + 2,
                total,
                f"Round {iteration + 1} of {config.iterations}: {len(found)} families",
                {"families": len(found), "tree_edges": tree.number_of_edges()},
            )
        )
    return families


def _binary_activity(codes: sp.spmatrix | sp.sparray) -> sp.csr_matrix:
    """A_dk = 1 where feature k is active on document d: [n_documents, n_features] int32, no stored zeros."""
    if not sp.issparse(codes):
        raise TypeError(f"codes must be a scipy sparse matrix [documents, features], got {type(codes).__name__}")
    active = sp.csr_matrix(codes, copy=True)
    active.sum_duplicates()
    active.data = (active.data > 0).astype(np.int32)
    active.eliminate_zeros()
    return active


def _ranked_activity(active: sp.csr_matrix, by_rank: np.ndarray) -> sp.csr_matrix:
    """The activity with feature `by_rank[r]` renamed r, indices sorted within each document."""
    rank = np.empty(len(by_rank), dtype=np.int32)
    rank[by_rank] = np.arange(len(by_rank), dtype=np.int32)
    ranked = sp.csr_matrix((active.data, rank[active.indices], active.indptr), shape=active.shape)
    ranked.has_sorted_indices = False
    ranked.sort_indices()
    return ranked


def _later_in_document(ranked: sp.csr_matrix) -> np.ndarray:
    """For each stored entry, how many entries follow it in its document (the pairs it opens): [nnz], int32 below
    2**31 entries (half the memory of int64 at a million documents' 32 million)."""
    dtype = _entry_dtype(ranked.nnz)
    row_end = np.repeat(ranked.indptr[1:].astype(dtype), np.diff(ranked.indptr))
    row_end -= np.arange(1, ranked.nnz + 1, dtype=dtype)
    return row_end


def _entries_by_feature(ranked: sp.csr_matrix) -> sp.csc_matrix:
    """Positions in `ranked.indices` of each feature's entries: column f of the result lists feature f's."""
    positions = np.arange(ranked.nnz, dtype=_entry_dtype(ranked.nnz))
    return sp.csr_matrix((positions, ranked.indices, ranked.indptr), shape=ranked.shape).tocsc()


def _entry_dtype(n_entries: int) -> type[np.signedinteger]:
    """The integer type that numbers `n_entries` stored entries: int32 when it can."""
    return np.int32 if n_entries < 2**31 else np.int64


def _feature_blocks(pairs: np.ndarray, block_entries: int, block_pairs: int) -> list[tuple[int, int]]:
    """Contiguous ranges [start, stop) of ranked features whose count block ([stop - start, n - start]) holds
    at most `block_entries` counts and whose features open at most `block_pairs` pairs (a single feature may
    exceed either bound on its own)."""
    n_features = len(pairs)
    blocks = []
    start = 0
    while start < n_features:
        max_width = max(1, block_entries // (n_features - start))
        opened = np.cumsum(pairs[start : start + max_width])
        stop = start + max(1, int(np.searchsorted(opened, block_pairs, side="right")))
        blocks.append((start, stop))
        start = stop
    return blocks


def _block_counts(
    ranked: sp.csr_matrix, entries: sp.csc_matrix, later: np.ndarray, start: int, stop: int, block_pairs: int
) -> np.ndarray:
    """C[i, j] for ranked features i in [start, stop) and j > i, counted from every document's pairs
    (entry, later entry), about `block_pairs` pairs at a time (a dense feature alone may open tens of millions):
    [stop - start, n_features - start] int64, column c is feature start + c."""
    width = ranked.shape[1] - start
    firsts = entries.data[entries.indptr[start] : entries.indptr[stop]]
    opened = later[firsts]
    bounds = np.searchsorted(np.cumsum(opened), np.arange(block_pairs, opened.sum() + block_pairs, block_pairs))
    counts = np.zeros((stop - start) * width, np.int64)
    for low, high in pairwise([0, *(bounds + 1).clip(max=len(firsts)).tolist()]):
        counts += _pair_counts(ranked, firsts[low:high], opened[low:high], start, width, len(counts))
    return counts.reshape(stop - start, width)


def _pair_counts(
    ranked: sp.csr_matrix, firsts: np.ndarray, opened: np.ndarray, start: int, width: int, n_counts: int
) -> np.ndarray:
    """Counts [n_counts] of the pairs (entry, later entry of its document) that these first entries open."""
    offsets = np.cumsum(opened) - opened
    seconds = np.arange(offsets[-1] + opened[-1] if len(opened) else 0, dtype=np.int64)
    seconds += np.repeat(firsts + 1 - offsets, opened)
    keys = np.repeat((ranked.indices[firsts].astype(np.int64) - start) * width - start, opened)
    keys += ranked.indices[seconds]
    return np.bincount(keys, minlength=n_counts)


@dataclass(frozen=True)
class _Linked:
    """Which counted pairs are edges: weight at least tau, at least min_shared documents, above chance."""

    ranked_density: np.ndarray  # [n_features] documents per feature, densest first
    n_documents: int
    tau: float
    min_shared: int

    def edges(self, counts: np.ndarray, start: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Ranked pairs (i, j) of one count block (rows: features from `start`, columns: j >= start)."""
        sparser = self.ranked_density[start:] + _EPS
        # A slightly loose test picks candidates cheaply over the dense block; the exact tests decide.
        rows, cols = np.nonzero((counts >= self.min_shared) & (counts >= self.tau * sparser * (1 - 1e-9)))
        together = counts[rows, cols]
        weight = together / sparser[cols]
        chance = self.ranked_density[rows + start] * self.ranked_density[cols + start] / max(self.n_documents, 1)
        kept = (weight >= self.tau) & (together > chance + CHANCE_SPREAD * np.sqrt(chance))
        return rows[kept] + start, cols[kept] + start, weight[kept]


def _oriented_forest(i: np.ndarray, j: np.ndarray, weight: np.ndarray, density: np.ndarray) -> nx.DiGraph:
    """Maximum spanning forest of the thresholded graph, each edge pointing from the denser feature (parent) to
    the sparser one (child); equal densities make the lower feature id the parent.

    scipy's compiled spanning-forest routine picks the edges: networkx's pure-Python Kruskal took about 3 s a
    round on the 440,000 edges of 12,288 features (bench/families.py); networkx then holds the oriented forest
    for the roots and the DFS. It minimises and reads 0 as "no edge", so it gets 2 - w: every weight w lies in
    (0, 1], which makes 2 - w positive and ranks edges the same way. The forest depends only on (i, j, w).
    """
    n_features = len(density)
    cost = sp.csr_matrix((2.0 - weight, (i, j)), shape=(n_features, n_features))
    forest = minimum_spanning_tree(cost).tocoo()
    u, v = np.minimum(forest.row, forest.col), np.maximum(forest.row, forest.col)
    # (i, j) arrive sorted, so the exact weights are found by the pair's key rather than recomputed from 2 - w.
    w = weight[np.searchsorted(i.astype(np.int64) * n_features + j, u.astype(np.int64) * n_features + v)]
    import networkx as nx

    tree = nx.DiGraph()
    tree.add_nodes_from(np.unique(np.concatenate([i, j])).tolist())
    oriented = sorted(_orient(a, b, c, density) for a, b, c in zip(u.tolist(), v.tolist(), w.tolist(), strict=True))
    tree.add_weighted_edges_from(oriented)
    return tree


def _orient(u: int, v: int, weight: float, density: np.ndarray) -> tuple[int, int, float]:
    lower, higher = min(u, v), max(u, v)
    if density[higher] > density[lower]:
        return higher, lower, weight
    return lower, higher, weight


def _roots(tree: nx.DiGraph) -> list[int]:
    """Nodes with no incoming edge and at least one child, in ascending id order."""
    return [node for node in tree.nodes if tree.in_degree(node) == 0 and tree.out_degree(node) > 0]


def _families_of_round(
    tree: nx.DiGraph,
    roots: list[int],
    iteration: int,
    first_id: int,
    min_family_size: int,
) -> list[Family]:
    """One family per root (DFS along the oriented edges), numbered from `first_id` in root order."""
    import networkx as nx

    families = []
    for root in roots:
        members = [int(node) for node in nx.dfs_preorder_nodes(tree, root)]
        if len(members) < min_family_size:
            continue
        edges = [(int(u), int(v), float(tree.edges[u, v]["weight"])) for u, v in nx.dfs_edges(tree, root)]
        families.append(Family(first_id + len(families), iteration, int(root), members, edges))
    return families
