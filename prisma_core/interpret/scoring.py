"""How well a label describes its feature, measured rather than assumed (SPEC section 5).

- the embedding score (label_scores, for every label of a run at once) needs no LLM: ROC-AUC of the cosine
  similarity between the label's embedding and the documents, 1.0 when every activating document is closer to the
  label than every non-activating one, 0.5 when the label says nothing about the feature.
- detection_score: given only the label, does a model pick held-out activating documents out of a shuffled
  mix with non-activating ones? Balanced accuracy, so 0.5 is chance whatever the mix.
- holdout_split keeps the documents shown to the labeller out of the documents used to score it.
"""

from collections.abc import Sequence
from typing import Protocol

import numpy as np


class Detector(Protocol):
    """What a detection check asks (`OllamaLabeller` is one)."""

    def check(self) -> None:
        """LabellingError with a plain message unless it can answer now; called before any score is asked."""
        ...

    def detect(self, label: str, documents: list[str]) -> list[bool]:
        """For each document, in order, whether it expresses the label."""
        ...


def detection_score(detector: Detector, label: str, positive: list[str], negative: list[str], seed: int) -> float:
    """Balanced accuracy of `detector` at telling positive from negative documents shown in a seeded shuffle."""
    if not positive or not negative:
        raise ValueError("detection needs at least one positive and one negative document")
    documents = [*positive, *negative]
    is_positive = np.r_[np.ones(len(positive), dtype=bool), np.zeros(len(negative), dtype=bool)]
    order = np.random.default_rng(seed).permutation(len(documents))
    flags = detector.detect(label, [documents[i] for i in order])
    if len(flags) != len(documents):
        raise ValueError(f"the detector returned {len(flags)} answers for {len(documents)} documents")
    from sklearn.metrics import balanced_accuracy_score  # here: a fresh server's first view need not import it

    return float(balanced_accuracy_score(is_positive[order], np.asarray(flags, dtype=bool)))


def holdout_split(doc_indices: Sequence[int] | np.ndarray, n_evidence: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Split a feature's activating documents into (evidence, held_out), disjoint.

    doc_indices are ordered by decreasing activation. Evidence is the n_evidence strongest, as shown to the
    labeller; held_out is every other activating document in a seeded random order, so taking its first m
    gives a random sample across the feature's activation range rather than only the next-strongest.
    """
    indices = np.asarray(doc_indices, dtype=np.int64)
    if indices.ndim != 1:
        raise ValueError(f"doc_indices must be 1-d, got shape {indices.shape}")
    if len(np.unique(indices)) != len(indices):
        raise ValueError("doc_indices must not repeat a document")
    if n_evidence < 0:
        raise ValueError(f"n_evidence must be >= 0, got {n_evidence}")
    evidence, rest = indices[:n_evidence], indices[n_evidence:]
    return evidence, np.random.default_rng(seed).permutation(rest)
