"""Feature analysis and exploration on sparse codes (SPEC sections 4 and 7).

Codes are a `scipy.sparse.csr_matrix` [n_documents, n_features] with k non-zeros per row; nothing here ever builds
a dense documents x features matrix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp
from numpy.typing import ArrayLike


def codes_from_rows(
    positions: np.ndarray,
    features: np.ndarray,
    values: np.ndarray,
    n_docs: int,
    n_features: int,
) -> sp.csr_matrix:
    """Sparse codes from stored (document position, feature, value) rows."""
    return sp.csr_matrix((values, (positions, features)), shape=(n_docs, n_features), dtype=np.float32)


BACKGROUND_SHARE = 0.5
"""A feature active on at least this share of the documents is background: something most documents have (a note's
template, a newspaper's house style), not a subject that sets some of them apart."""
STRONG_SHARE = 0.25
"""An activation is strong when it reaches this share of its document's largest activation. TopK gives every
document k active features; the strong ones are the handful that say what the document is about."""


def strong_activations(values: ArrayLike, largest: ArrayLike, share: float = STRONG_SHARE) -> np.ndarray:
    """[n] bool: which activations are strong, each against the largest activation of its document (`largest`: one
    number for one document's activations, else one per activation). The one definition of a strong activation."""
    return np.asarray(values) >= share * np.asarray(largest)


def strong_codes(codes: sp.csr_matrix, share: float = STRONG_SHARE) -> sp.csr_matrix:
    """The codes with every activation below `share` of its document's largest one removed."""
    strong = sp.csr_matrix(codes, copy=True)
    lengths = np.diff(strong.indptr)
    row_max = np.zeros(strong.shape[0], dtype=strong.dtype)
    nonempty = lengths > 0
    row_max[nonempty] = np.maximum.reduceat(strong.data, strong.indptr[:-1][nonempty])
    strong.data[~strong_activations(strong.data, np.repeat(row_max, lengths), share)] = 0
    strong.eliminate_zeros()
    return strong


def background_features(codes: sp.csr_matrix) -> np.ndarray:
    """[n_features] bool: the features active on at least BACKGROUND_SHARE of the documents."""
    density = np.diff(sp.csc_matrix(codes).indptr)
    return density >= BACKGROUND_SHARE * max(codes.shape[0], 1)


def without_features(codes: sp.csr_matrix, dropped: np.ndarray) -> sp.csr_matrix:
    """The codes with every activation of the `dropped` features ([n_features] bool) removed."""
    kept = sp.csr_matrix(codes, copy=True)
    kept.data[dropped[kept.indices]] = 0
    kept.eliminate_zeros()
    return kept


def strong_density(codes: sp.csr_matrix) -> np.ndarray:
    """Per feature: the number of documents where it is a strong activation (the documents label scores rest on)."""
    return np.diff(strong_codes(codes).tocsc().indptr).astype(np.int64)


def feature_stats(codes: sp.csr_matrix) -> pd.DataFrame:
    """Per feature: density (documents active), density fraction, mean activation when active, max activation."""
    coo = codes.tocoo()
    totals = FeatureTotals(codes.shape[1])
    totals.add(coo.data, coo.col, codes.shape[0])
    return totals.stats()


class FeatureTotals:
    """`feature_stats` accumulated over slices of documents, so the codes of a large corpus need not be held to
    compute them."""

    def __init__(self, n_features: int) -> None:
        self.n_documents = 0
        self.density = np.zeros(n_features, dtype=np.int64)
        self.sums = np.zeros(n_features, dtype=np.float64)
        self.maxima = np.zeros(n_features, dtype=np.float64)

    def add(self, values: np.ndarray, features: np.ndarray, n_documents: int | None = None) -> None:
        """One slice's activations: values and feature ids of the same shape, [m, k] top-k codes of m documents (or
        flat, with n_documents given); zeros count as inactive."""
        self.n_documents += len(values) if n_documents is None else n_documents
        active = values > 0
        features, values = features[active], values[active]
        n_features = len(self.density)
        self.density += np.bincount(features, minlength=n_features)
        self.sums += np.bincount(features, weights=values, minlength=n_features)
        np.maximum.at(self.maxima, features, values)

    def stats(self) -> pd.DataFrame:
        density = self.density
        return pd.DataFrame(
            {
                "feature_id": np.arange(len(density), dtype=np.int32),
                "density": density,
                "density_fraction": density / max(self.n_documents, 1),
                "mean_activation": np.divide(self.sums, density, out=np.zeros_like(self.sums), where=density > 0),
                "max_activation": self.maxima,
            }
        )


def feature_column(codes: sp.csr_matrix, feature: int) -> tuple[np.ndarray, np.ndarray]:
    """(document positions, values) where the feature is active."""
    column = codes[:, [feature]].tocoo()
    return column.row.astype(np.int64), column.data.astype(np.float32)


def top_documents(codes: sp.csr_matrix, feature: int, n: int = 10) -> pd.DataFrame:
    positions, values = feature_column(codes, feature)
    order = np.argsort(-values, kind="stable")[:n]
    return pd.DataFrame({"position": positions[order], "value": values[order]})


def zero_documents(codes: sp.csr_matrix, feature: int, n: int = 10, seed: int = 0) -> np.ndarray:
    """A random sample of documents where the feature is not active (contrast examples)."""
    active = np.zeros(codes.shape[0], dtype=bool)
    active[feature_column(codes, feature)[0]] = True
    inactive = np.flatnonzero(~active)
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(inactive, size=min(n, len(inactive)), replace=False))


def nearest_features(directions: np.ndarray, feature: int, n: int = 10) -> pd.DataFrame:
    """Features whose decoder directions ([n_features, d], unit norm) are closest by cosine."""
    cosines = directions @ directions[feature]
    cosines[feature] = -np.inf
    order = np.argsort(-cosines, kind="stable")[:n]
    return pd.DataFrame({"feature_id": order.astype(np.int32), "cosine": cosines[order]})


def decoder_similarity(directions: np.ndarray, features: Sequence[int]) -> np.ndarray:
    """Cosine similarity of decoder directions for a subset of features, [m, m]."""
    subset = directions[list(features)]
    return subset @ subset.T


def cooccurrence(codes: sp.csr_matrix, features: Sequence[int]) -> np.ndarray:
    """P(j active | i active) for a subset of features, [m, m] (row-normalised co-occurrence)."""
    active = (codes[:, list(features)] > 0).astype(np.float32)
    counts = (active.T @ active).toarray()
    return counts / np.maximum(np.diag(counts)[:, None], 1.0)


def document_features(codes: sp.csr_matrix, position: int) -> pd.DataFrame:
    """The active features of one document, strongest first."""
    row = codes.getrow(position)
    order = np.argsort(-row.data, kind="stable")
    return pd.DataFrame({"feature_id": row.indices[order].astype(np.int32), "value": row.data[order]})


def concept_query(
    codes: sp.csr_matrix,
    must: Mapping[int, float] | None = None,
    must_not: Mapping[int, float] | None = None,
) -> np.ndarray:
    """Positions of documents where every `must` feature exceeds its threshold and no `must_not` feature does.

    Thresholds are activation values; 0 means "active at all". E.g. bronchiolitis AND NOT suspected.
    """
    csc = codes.tocsc()
    keep = np.ones(codes.shape[0], dtype=bool)
    for feature, threshold in (must or {}).items():
        keep &= _above(csc, feature, threshold)
    for feature, threshold in (must_not or {}).items():
        keep &= ~_above(csc, feature, threshold)
    return np.flatnonzero(keep)


def _above(csc: sp.csc_matrix, feature: int, threshold: float) -> np.ndarray:
    start, end = csc.indptr[feature], csc.indptr[feature + 1]
    mask = np.zeros(csc.shape[0], dtype=bool)
    rows, values = csc.indices[start:end], csc.data[start:end]
    mask[rows[values > threshold]] = True
    return mask
