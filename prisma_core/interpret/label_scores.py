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

from prisma_core.concepts.analysis import strong_codes
from prisma_core.config_docs import CheckedConfig, setting
from prisma_core.embed import EmbedConfig
from prisma_core.embed.cache import VectorCache, embed_cached
from prisma_core.interpret.label_choice import CHANCE
from prisma_core.interpret.scoring import holdout_split
from prisma_core.store.vectors import DocumentVectors, unit_rows, vector_rows

Basis = Literal["held_out", "in_sample", "too_few"]
LABEL_BATCH_SIZE = 1024
"""Labels are a few tokens long: big batches cost little memory, and embedded the BBC keyword labels 3x faster."""
FEATURES_PER_READ = 64
"""Features whose scoring documents are read together (at most 700 each: about 70 MB of vectors at 384 dimensions)."""


@dataclass(frozen=True)
class ScoreConfig(CheckedConfig):
    settings_name = "label score"

    n_shown: int = setting(
        20,
        minimum=0,
        maximum=10_000,
        doc="Strongest activating documents kept out of scoring: a labeller may have seen them.",
    )
    min_positives: int = setting(
        5,
        minimum=1,
        maximum=200,
        doc="Fewest activating documents to score on (held out if possible, else all of them).",
    )
    max_positives: int = setting(
        200, minimum=5, maximum=100_000, doc="Activating documents sampled per feature for the embedding score."
    )
    n_negatives: int = setting(
        500, minimum=1, maximum=100_000, doc="Non-activating documents sampled per feature for the embedding score."
    )
    n_detect_positives: int = setting(
        5, minimum=1, maximum=100, doc="Activating documents shown in a detection check (from the same sample)."
    )
    n_detect_negatives: int = setting(
        5, minimum=1, maximum=100, doc="Non-activating documents shown in a detection check."
    )
    detect_keyword_labels: bool = setting(
        False, doc="Also run the LLM detection check on keyword labels (one call each)."
    )
    max_consecutive_failures: int = setting(
        3, minimum=1, maximum=1_000, doc="Stop the detection checks after this many failures in a row."
    )
    seed: int = setting(0, minimum=0, maximum=2**31 - 1, doc="Seeds the document samples (with the feature id).")

    def other_problems(self) -> list[str]:
        if self.max_positives >= self.min_positives:
            return []
        return [f"max_positives must be at least min_positives ({self.min_positives}), got {self.max_positives}"]


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

    The same number as sklearn's roc_auc_score without its per-call validation, which would dominate when every
    feature of a run is scored.
    """
    negative = np.sort(negative)
    below = np.searchsorted(negative, positive, side="left")
    tied = np.searchsorted(negative, positive, side="right") - below
    return float((below + 0.5 * tied).sum() / (len(positive) * len(negative)))


def label_embedding_scores(
    feature_ids: Sequence[int],
    labels: Sequence[str],
    codes: sp.spmatrix,
    doc_vectors: DocumentVectors,
    embed_config: EmbedConfig,
    config: ScoreConfig = ScoreConfig(),
    cache: VectorCache | None = None,
) -> EmbeddingScores:
    """Embedding score of each (feature, label) pair; the distinct labels of scoreable features are embedded in one
    batch (none at all when no feature can be scored), only those `cache` (the workspace) lacks when given.

    codes: [n_docs, n_features]; doc_vectors: [n_docs, d] in the space `embed_config` names, in memory or stored
    (then only the scored documents are read, for FEATURES_PER_READ features at a time).
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
    vector_of = dict(zip(distinct, unit_rows(embed_cached(distinct, label_config, cache)), strict=True))
    scored = [i for i, b in enumerate(basis) if b != "too_few"]
    for start in range(0, len(scored), FEATURES_PER_READ):
        group = scored[start : start + FEATURES_PER_READ]
        chosen = [documents[feature_ids[i]] for i in group]
        positions = np.unique(np.concatenate([np.concatenate([c.positives, c.negatives]) for c in chosen]))
        documents_unit = unit_rows(vector_rows(doc_vectors, positions))
        for i, picked in zip(group, chosen, strict=True):
            positive = documents_unit[np.searchsorted(positions, picked.positives)] @ vector_of[labels[i]]
            negative = documents_unit[np.searchsorted(positions, picked.negatives)] @ vector_of[labels[i]]
            scores[i] = roc_auc(positive, negative)
    return EmbeddingScores(scores, basis)


# -- reading a score: its support, an uncertainty band, and chance ----------------------------------------------

Z_95 = 1.96


@dataclass(frozen=True)
class ScoreSupport:
    """How many documents each feature's score rests on, without drawing them: the counts `scoring_documents`
    would use. Arrays are [n_features]."""

    n_positives: np.ndarray
    n_negatives: np.ndarray
    basis: list[Basis]


def score_support(density: np.ndarray, n_docs: int, config: ScoreConfig = ScoreConfig()) -> ScoreSupport:
    """The positives and negatives behind the embedding score of features strong on `density` documents each
    (`analysis.strong_density`)."""
    density = np.asarray(density, dtype=np.int64)
    held_out = np.maximum(density - config.n_shown, 0)
    negatives = np.minimum(config.n_negatives, n_docs - density)
    basis: list[Basis] = [
        "too_few"
        if n_negative <= 0
        else "held_out"
        if n_held >= config.min_positives
        else "in_sample"
        if n_active >= config.min_positives
        else "too_few"
        for n_active, n_held, n_negative in zip(density, held_out, negatives, strict=True)
    ]
    chosen = np.array([h if b == "held_out" else a for a, h, b in zip(density, held_out, basis, strict=True)])
    positives = np.where([b == "too_few" for b in basis], 0, np.minimum(chosen, config.max_positives))
    return ScoreSupport(positives.astype(np.int64), np.where(positives > 0, negatives, 0).astype(np.int64), basis)


def auc_band(score: float, n_positives: int, n_negatives: int, z: float = Z_95) -> tuple[float, float]:
    """About 95% of the ROC-AUCs another sample of as many documents would give: score +- z standard errors
    (Hanley & McNeil 1982), clipped to [0, 1]. NaN band when there is no score."""
    if not np.isfinite(score) or n_positives < 1 or n_negatives < 1:
        return float("nan"), float("nan")
    q1, q2 = score / (2 - score), 2 * score**2 / (1 + score)
    variance = (score * (1 - score) + (n_positives - 1) * (q1 - score**2) + (n_negatives - 1) * (q2 - score**2)) / (
        n_positives * n_negatives
    )
    # at a score of 1.0 the formula gives 0: keep the spread of a score one document away from perfect
    floor = 1 / (4 * n_positives * n_negatives)
    half = z * float(np.sqrt(max(variance, floor)))
    return max(0.0, score - half), min(1.0, score + half)


def detection_band(score: float, n_positives: int, n_negatives: int, z: float = Z_95) -> tuple[float, float]:
    """Band of a balanced accuracy over so few documents, at its widest (each rate's variance taken at 0.5)."""
    if not np.isfinite(score) or n_positives < 1 or n_negatives < 1:
        return float("nan"), float("nan")
    half = z * float(np.sqrt((0.25 / n_positives + 0.25 / n_negatives) / 4))
    return max(0.0, score - half), min(1.0, score + half)


def verdict(low: float, high: float) -> str:
    """Where a band stands against chance (0.5): "above chance", "at chance" or "below chance"."""
    if low > CHANCE:
        return "above chance"
    if high < CHANCE:
        return "below chance"
    return "at chance"


def one_feature_support(n_strong: int, n_docs: int, keyword_top_documents: int) -> ScoreSupport:
    """The documents one feature's label scores rest on (counts), as the scoring chose them: `n_strong` documents
    where it is strong (`analysis.strong_density`), of `n_docs`; the keyword labels were read from its
    `keyword_top_documents` strongest."""
    config = covering_keywords(ScoreConfig(), keyword_top_documents)
    return score_support(np.array([n_strong]), n_docs, config)


def score_words(score: float, support: ScoreSupport, detection: bool) -> str:
    """ "0.82 (0.74 to 0.90), above chance"; "not enough evidence" where the feature fires too rarely; "not scored"
    (or "not checked") for a label without that score, such as one written by hand."""
    if support.basis[0] == "too_few":
        return "not enough evidence"
    if score is None or not np.isfinite(score):
        return "not checked" if detection else "not scored"
    config = ScoreConfig()
    if detection:
        low, high = detection_band(score, config.n_detect_positives, config.n_detect_negatives)
    else:
        low, high = auc_band(score, int(support.n_positives[0]), int(support.n_negatives[0]))
    return f"{score:.2f} ({low:.2f} to {high:.2f}), {verdict(low, high)}"


def support_words(support: ScoreSupport) -> str:
    """What one feature's scores rest on, in a sentence (`one_feature_support`)."""
    basis, n_pos, n_neg = support.basis[0], int(support.n_positives[0]), int(support.n_negatives[0])
    if basis == "too_few":
        return (
            "Not enough evidence to score a label: this feature fires on too few documents (or on all of them). "
            "Judge its labels by its documents above."
        )
    kept = "documents no labeller was shown" if basis == "held_out" else "all its documents (too few to hold any out)"
    return f"Scores rest on {n_pos:,} of the feature's {kept} against {n_neg:,} others. Chance is 0.50."


def shuffled_labels(
    feature_ids: Sequence[int], labels: Sequence[str], codes: sp.spmatrix, config: ScoreConfig, seed: int = 0
) -> tuple[list[int], list[str]]:
    """The baseline's (feature ids, labels): the scoreable features, each with another one's label (a seeded
    shuffle). Scored with `label_embedding_scores`, its mean sits near 0.5; a labeller is only as good as its lead
    over it."""
    csc = sp.csc_matrix(codes)
    scoreable = [i for i, f in enumerate(feature_ids) if scoring_documents(csc, f, config).basis != "too_few"]
    order = np.random.default_rng(seed).permutation(len(scoreable))
    return [feature_ids[i] for i in scoreable], [labels[scoreable[j]] for j in order]
