"""Which documents score a label, and the embedding score of many labels at once (no LLM).

Every interpretation of a feature is scored on the same documents, so the scores of its labels compare:
- positives: the documents that contain the feature (it is among the document's strong activations, see
  `analysis.strong_codes`: a weak trace of a feature is not its concept) ranked below its `n_shown` strongest, which
  a labeller may have been shown (keyword labels are built from the top 20, Ollama sees the top `n_evidence` = 8),
  in a seeded random order, at most `max_positives` of them. These are "held out": the label never saw them.
- fallback: a feature active on too few documents to hold `min_positives` of them out is scored on all its
  activating documents instead. That score is in-sample, hence optimistic; `ScoringDocuments.basis` says so.
- a feature active on fewer than `min_positives` documents (or on every document) gets no score (NaN): a
  ROC-AUC over a handful of documents says little.
- negatives: a seeded sample of `n_negatives` documents where the feature is zero.

The sampling is seeded by (seed, feature), so it does not depend on which other features are scored with it.
"""

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import scipy.sparse as sp

from prisma_core.analysis import strong_codes
from prisma_core.embed import EmbedConfig, embed_texts
from prisma_core.interpret.scoring import holdout_split

Basis = Literal["held_out", "in_sample", "too_few"]
LABEL_BATCH_SIZE = 1024
"""Labels are a few tokens long: big batches cost little memory, and embedded the BBC keyword labels 3x faster."""


@dataclass(frozen=True)
class ScoreConfig:
    n_shown: int = 20  # strongest activating documents kept out of scoring: a labeller may have seen them
    min_positives: int = 5  # fewest activating documents to score on (held out if possible, else all of them)
    max_positives: int = 200  # activating documents sampled per feature for the embedding score
    n_negatives: int = 500  # non-activating documents sampled per feature for the embedding score
    n_detect_positives: int = 5  # activating documents shown in a detection check (from the same sample)
    n_detect_negatives: int = 5  # non-activating documents shown in a detection check
    detect_keyword_labels: bool = False  # also run the LLM detection check on keyword labels (one call each)
    max_consecutive_failures: int = 3  # stop the detection checks after this many failures in a row
    seed: int = 0  # seeds the document samples (with the feature id)

    def __post_init__(self) -> None:
        if self.n_shown < 0:
            raise ValueError(f"n_shown must be >= 0, got {self.n_shown}")
        if self.min_positives < 1 or self.max_positives < self.min_positives:
            raise ValueError("min_positives must be >= 1 and max_positives >= min_positives")
        if min(self.n_negatives, self.n_detect_positives, self.n_detect_negatives) < 1:
            raise ValueError("n_negatives, n_detect_positives and n_detect_negatives must be >= 1")
        if self.max_consecutive_failures < 1:
            raise ValueError(f"max_consecutive_failures must be >= 1, got {self.max_consecutive_failures}")


@dataclass(frozen=True)
class ScoringDocuments:
    positives: np.ndarray  # document positions the feature is active on, in a seeded random order
    negatives: np.ndarray  # document positions where it is zero, in a seeded random order
    basis: Basis


@dataclass(frozen=True)
class EmbeddingScores:
    scores: np.ndarray  # [n_labels] ROC-AUC in [0, 1], NaN where basis is "too_few"
    basis: list[Basis]  # [n_labels]


def covering_keywords(config: ScoreConfig, keyword_top_documents: int) -> ScoreConfig:
    """The config with n_shown raised, if needed, to cover the documents the run's keyword labels came from."""
    return replace(config, n_shown=max(config.n_shown, keyword_top_documents))


def scoring_documents(codes: sp.csc_matrix, feature: int, config: ScoreConfig) -> ScoringDocuments:
    """The documents that score every label of `feature` (see the module docstring). codes: [n_docs, n_features]."""
    rng = np.random.default_rng([config.seed, feature])
    ranked = ranked_documents(codes, feature)
    _, held_out = holdout_split(ranked, config.n_shown, seed=int(rng.integers(2**31)))
    negatives = _sample_inactive(codes.shape[0], ranked, config.n_negatives, rng)
    if not len(negatives):
        return ScoringDocuments(np.empty(0, np.int64), negatives, "too_few")
    if len(held_out) >= config.min_positives:
        return ScoringDocuments(held_out[: config.max_positives], negatives, "held_out")
    if len(ranked) >= config.min_positives:
        return ScoringDocuments(rng.permutation(ranked)[: config.max_positives], negatives, "in_sample")
    return ScoringDocuments(np.empty(0, np.int64), negatives, "too_few")


def ranked_documents(codes: sp.csc_matrix, feature: int) -> np.ndarray:
    """Positions where the feature is active, strongest first, ties by position (as `analysis.top_documents`)."""
    start, end = codes.indptr[feature], codes.indptr[feature + 1]
    rows, values = codes.indices[start:end].astype(np.int64), codes.data[start:end]
    return rows[np.lexsort((rows, -values))]


def _sample_inactive(n_docs: int, active: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    is_active = np.zeros(n_docs, dtype=bool)
    is_active[active] = True
    inactive = np.flatnonzero(~is_active)
    return rng.choice(inactive, size=min(n, len(inactive)), replace=False)


def roc_auc(positive: np.ndarray, negative: np.ndarray) -> float:
    """ROC-AUC of scores separating positive [p] from negative [q]: the share of (positive, negative) pairs ranked
    the right way round, ties counting half.

    The same number as `scoring.embedding_score` (sklearn's roc_auc_score) without its per-call validation, which
    would dominate when every feature of a run is scored.
    """
    negative = np.sort(negative)
    below = np.searchsorted(negative, positive, side="left")
    tied = np.searchsorted(negative, positive, side="right") - below
    return float((below + 0.5 * tied).sum() / (len(positive) * len(negative)))


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), so dot products are cosines. [n, d] -> [n, d]."""
    return matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)


def label_embedding_scores(
    feature_ids: Sequence[int],
    labels: Sequence[str],
    codes: sp.spmatrix,
    doc_vectors: np.ndarray,
    embed_config: EmbedConfig,
    config: ScoreConfig = ScoreConfig(),
) -> EmbeddingScores:
    """Embedding score of each (feature, label) pair; the distinct labels of scoreable features are embedded in one
    batch (none at all when no feature can be scored).

    codes: [n_docs, n_features]; doc_vectors: [n_docs, d] in the space `embed_config` names.
    """
    if len(feature_ids) != len(labels):
        raise ValueError(f"got {len(feature_ids)} feature ids for {len(labels)} labels")
    csc = sp.csc_matrix(strong_codes(sp.csr_matrix(codes)))
    documents = {feature: scoring_documents(csc, feature, config) for feature in set(feature_ids)}
    basis = [documents[feature].basis for feature in feature_ids]
    scores = np.full(len(labels), np.nan)
    distinct = sorted({label for label, b in zip(labels, basis, strict=True) if b != "too_few"})
    if not distinct:
        return EmbeddingScores(scores, basis)
    label_config = replace(embed_config, batch_size=max(embed_config.batch_size, LABEL_BATCH_SIZE))
    vector_of = dict(zip(distinct, unit_rows(embed_texts(distinct, label_config)), strict=True))
    documents_unit = unit_rows(doc_vectors)
    for i, (feature, label) in enumerate(zip(feature_ids, labels, strict=True)):
        chosen = documents[feature]
        if chosen.basis != "too_few":
            positive = documents_unit[chosen.positives] @ vector_of[label]
            negative = documents_unit[chosen.negatives] @ vector_of[label]
            scores[i] = roc_auc(positive, negative)
    return EmbeddingScores(scores, basis)
