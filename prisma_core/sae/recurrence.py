"""Whether a feature comes back: the features of two trainings matched by their activations over the same documents.

A feature recurs when another training (another seed, more documents) has a feature whose activations over the same
documents correlate with it at RECURS_AT or more (Pearson, SPEC section 3). Nothing here builds a dense documents x
features matrix: the correlations come from one sparse product of the two trainings' codes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

RECURS_AT = 0.7
"""Activation correlation at which two trainings' features count as the same feature."""


def activation_correlation(a: sp.spmatrix, b: sp.spmatrix) -> np.ndarray:
    """Pearson correlation of every feature of `a` [n_documents, p] with every feature of `b` [n_documents, q] over
    the same documents -> [p, q]; 0 for a feature that never varies (never fires, or fires alike everywhere)."""
    a, b = sp.csc_matrix(a, dtype=np.float64), sp.csc_matrix(b, dtype=np.float64)
    n_documents = a.shape[0]
    mean_a, spread_a = _mean_and_spread(a)
    mean_b, spread_b = _mean_and_spread(b)
    covariance = (a.T @ b).toarray() / n_documents - np.outer(mean_a, mean_b)
    scale = np.outer(spread_a, spread_b)
    return np.divide(covariance, scale, out=np.zeros_like(covariance), where=scale > 0)


def _mean_and_spread(codes: sp.csc_matrix) -> tuple[np.ndarray, np.ndarray]:
    """Per feature: the mean activation over all documents and its standard deviation."""
    n_documents = codes.shape[0]
    mean = np.asarray(codes.sum(axis=0)).ravel() / n_documents
    mean_square = np.asarray(codes.multiply(codes).sum(axis=0)).ravel() / n_documents
    return mean, np.sqrt(np.maximum(mean_square - mean**2, 0.0))


def best_matches(a: sp.spmatrix, b: sp.spmatrix) -> tuple[np.ndarray, np.ndarray]:
    """For every feature of `a`: the feature of `b` whose activations correlate most with it, and that correlation
    ([p] int, [p] float)."""
    correlation = activation_correlation(a, b)
    if correlation.shape[1] == 0:
        return np.full(correlation.shape[0], -1), np.zeros(correlation.shape[0])
    best = correlation.argmax(axis=1)
    return best, correlation[np.arange(len(best)), best]


def matched_features(codes: Sequence[sp.spmatrix], threshold: float = RECURS_AT) -> list[dict[int, int]]:
    """The features that several trainings on the same documents share: groups {training: feature}, each feature in
    exactly one group (a feature no other training shares is a group of one).

    Two features join when each is the other's most correlated feature (a mutual best match) at `threshold` or more.
    The trainings are visited in order, and each one's features densest first, so the grouping is deterministic.
    """
    density = [np.diff(sp.csc_matrix(own).indptr) for own in codes]
    correlations = {
        (a, b): activation_correlation(codes[a], codes[b]) for a in range(len(codes)) for b in range(a + 1, len(codes))
    }
    grouped = [np.zeros(len(own), dtype=bool) for own in density]
    groups = []
    for a, own in enumerate(density):
        for feature in np.argsort(-own, kind="stable"):
            if grouped[a][feature]:
                continue
            group = {a: int(feature)}
            for b in range(a + 1, len(codes)):
                match = _mutual_best(correlations[a, b], int(feature), threshold)
                if match is not None and not grouped[b][match]:
                    group[b] = match
            for training, member in group.items():
                grouped[training][member] = True
            groups.append(group)
    return groups


def _mutual_best(correlation: np.ndarray, feature: int, threshold: float) -> int | None:
    """The column that row `feature` correlates with most, when the row is also that column's best and the
    correlation reaches `threshold`."""
    if correlation.shape[1] == 0:
        return None
    match = int(correlation[feature].argmax())
    mutual = int(correlation[:, match].argmax()) == feature
    return match if mutual and correlation[feature, match] >= threshold else None


@dataclass(frozen=True)
class Recurrence:
    """How the features of several trainings on the same documents come back in the others."""

    share: float
    """Share of firing features that recur in every other training (mean over the trainings)."""
    share_by_documents: float
    """The same, each feature weighted by the number of documents it fires on."""
    median_best_correlation: float
    """Median, over the firing features of every training, of the best correlation with another training."""


def recurrence(codes: Sequence[sp.spmatrix], threshold: float = RECURS_AT) -> Recurrence:
    """Recurrence of the features of each training (codes [n_documents, n_features] of at least two trainings)."""
    shares, weighted, best_all = [], [], []
    for i, own in enumerate(codes):
        density = np.diff(sp.csc_matrix(own).indptr)
        firing = density > 0
        best = np.stack([best_matches(own, other)[1] for j, other in enumerate(codes) if j != i]).min(axis=0)
        recurs = best[firing] >= threshold
        shares.append(recurs.mean() if firing.any() else 0.0)
        weighted.append((density[firing] * recurs).sum() / max(density[firing].sum(), 1))
        best_all.append(best[firing])
    return Recurrence(float(np.mean(shares)), float(np.mean(weighted)), float(np.median(np.concatenate(best_all))))
