"""What sets a group apart: the concepts that best predict a metadata column, scored on documents the model never saw.

A logistic regression (scikit-learn, multinomial) learns each document's group from which concepts it holds
(present or not), in `folds`-fold cross-validation: every document is predicted once, by a model fitted without it.
A concept's worth for a group is measured on those held-out documents only: the average drop, over the group's
documents, in the probability the model gives their right group when that concept's part of the model's vote is
left out. A concept that fits a few training documents by heart (memorisation) earns nothing on documents it never
saw, so it does not rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.special import softmax
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

from prisma_core.compare.groups import MISSING
from prisma_core.store.datasets import sample_positions

FOLDS = 5
PREDICTION_DOCUMENTS = 20_000
"""Documents the prediction learns from and is scored on at most (a seeded sample of larger collections)."""
REGULARISATION = 1.0
"""scikit-learn's C: smaller values keep the model simpler."""
ENTRIES_AT_ONCE = 200_000
"""Held-out (document, concept) entries whose left-out probabilities are computed at a time."""


@dataclass(frozen=True)
class Predictors:
    """The outcome of `group_predictors`."""

    frame: pd.DataFrame
    """group, feature_id, gain (average drop in the probability of the right group over the group's held-out
    documents when the concept is left out; 0.2 = 20 points), share (of the group's documents holding the concept);
    by group, largest gain first; only concepts that help (gain > 0)."""
    accuracy: float
    """Share of held-out documents whose most probable group is their own."""
    baseline: float
    """The accuracy of always guessing the largest group."""
    n_documents: int
    """Documents used (a seeded sample when the collection is larger than PREDICTION_DOCUMENTS)."""
    n_total: int
    left_out: tuple[str, ...]
    """Groups with fewer documents than folds: too small to predict, left out."""

    def sentence(self) -> str:
        """The prediction's quality in words."""
        sampled = ""
        if self.n_documents < self.n_total:
            sampled = f" (a random sample of {self.n_documents:,} of {self.n_total:,})"
        small = f" Groups too small to predict: {', '.join(self.left_out)}." if self.left_out else ""
        return (
            f"From their concepts alone, {self.accuracy:.0%} of documents{sampled} are put in their right group by a "
            f"model that never saw them; always guessing the largest group would get {self.baseline:.0%}.{small}"
        )


def group_predictors(
    units: sp.spmatrix,
    groups: pd.Series,
    folds: int = FOLDS,
    max_documents: int = PREDICTION_DOCUMENTS,
    seed: int = 0,
) -> Predictors | None:
    """The concepts (columns of units [n_documents, n_concepts], present where > 0) that best predict each
    document's group, scored on held-out documents; None when fewer than two groups have `folds` documents, or
    there is no concept (every one hidden)."""
    if units.shape[1] == 0:
        return None
    positions = sample_positions(units.shape[0], max_documents, seed)
    labels = groups.astype("string").fillna(MISSING).to_numpy()[positions]
    names, sizes = np.unique(labels, return_counts=True)
    kept = names[sizes >= folds]
    if len(kept) < 2:
        return None
    chosen = np.isin(labels, kept)
    present = (sp.csr_matrix(units)[positions[chosen]] > 0).astype(np.float64)
    truth = np.searchsorted(kept, labels[chosen])
    gains, correct = _held_out_gains(present, truth, len(kept), folds, seed)
    group_sizes = np.bincount(truth, minlength=len(kept))
    return Predictors(
        frame=_gain_frame(gains / group_sizes[:, None], present, truth, kept),
        accuracy=float(correct.mean()),
        baseline=float(group_sizes.max() / group_sizes.sum()),
        n_documents=int(chosen.sum()),
        n_total=units.shape[0],
        left_out=tuple(str(name) for name in names[sizes < folds]),
    )


def _held_out_gains(
    present: sp.csr_matrix, truth: np.ndarray, n_groups: int, folds: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """([n_groups, n_concepts] summed probability drops over held-out documents, [n_documents] whether each
    held-out document's most probable group is its own)."""
    gains = np.zeros((n_groups, present.shape[1]))
    correct = np.zeros(len(truth), dtype=bool)
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    for train, held in splitter.split(np.zeros(len(truth)), truth):
        model = LogisticRegression(C=REGULARISATION, max_iter=1000).fit(present[train], truth[train])
        weights, bias = _class_weights(model)
        logits = present[held] @ weights.T + bias  # [held, n_groups]
        correct[held] = logits.argmax(axis=1) == truth[held]
        gains += _probability_drops(present[held], logits, weights, truth[held], n_groups)
    return gains, correct


def _class_weights(model: LogisticRegression) -> tuple[np.ndarray, np.ndarray]:
    """([n_groups, n_concepts], [n_groups]) logit weights of every group; a two-group model keeps one row (the
    second group's), the first group's logit being 0. Stratified folds give every group training documents."""
    coef, intercept = model.coef_, model.intercept_
    if coef.shape[0] == 1:
        return np.vstack([np.zeros_like(coef), coef]), np.concatenate([[0.0], intercept])
    return coef, intercept


def _probability_drops(
    held: sp.csr_matrix, logits: np.ndarray, weights: np.ndarray, truth: np.ndarray, n_groups: int
) -> np.ndarray:
    """[n_groups, n_concepts]: for every held-out document's concepts, how much lower the probability of its right
    group is without that concept's votes, summed by right group."""
    coo = held.tocoo()
    drops = np.zeros((n_groups, held.shape[1]))
    for start in range(0, coo.nnz, ENTRIES_AT_ONCE):
        rows, cols = coo.row[start : start + ENTRIES_AT_ONCE], coo.col[start : start + ENTRIES_AT_ONCE]
        values = coo.data[start : start + ENTRIES_AT_ONCE]
        right = truth[rows]
        with_it = softmax(logits[rows], axis=1)[np.arange(len(rows)), right]
        without = softmax(logits[rows] - weights[:, cols].T * values[:, None], axis=1)[np.arange(len(rows)), right]
        np.add.at(drops, (right, cols), with_it - without)
    return drops


def _gain_frame(gains: np.ndarray, present: sp.csr_matrix, truth: np.ndarray, names: np.ndarray) -> pd.DataFrame:
    membership = sp.csr_matrix((np.ones(len(truth)), (truth, np.arange(len(truth)))), shape=(len(names), len(truth)))
    shares = (membership @ present).toarray() / np.bincount(truth, minlength=len(names))[:, None]
    group_idx, concept_idx = np.nonzero(gains > 0)
    frame = pd.DataFrame(
        {
            "group": names[group_idx].astype(object),
            "feature_id": concept_idx.astype(np.int32),
            "gain": gains[group_idx, concept_idx],
            "share": shares[group_idx, concept_idx],
        }
    )
    return frame.sort_values(["group", "gain"], ascending=[True, False], kind="stable").reset_index(drop=True)
