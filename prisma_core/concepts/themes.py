"""Themes: the few broad subjects of a corpus (the desks of a newspaper, the specialties of a clinic), each made of
SAE features, that an analyst reads first.

Themes are found after training, so their number can change without retraining:
1. Seed: spherical k-means on the documents' embeddings (unit length, corpus mean removed, first 50 principal
   components), started four times (`_STARTS`), the tightest grouping kept. With no number given, the numbers tried
   (a range that grows with the corpus) are first narrowed, from AGREEMENT_FROM documents, to those whose grouping
   comes back: the other starts agree with the kept one (adjusted Rand index >= REPRODUCIBLE on average). Among
   them, the largest that separates the documents about as well as the best one (cosine silhouette on a seeded
   sample, within 5%) is chosen. A number whose groups k-means draws differently from each start (a sixth group in a
   corpus of five subjects) is a coin toss that the slightest change of the vectors, another CPU's arithmetic
   included, turns the other way (BENCHMARKS.md section 20).
2. Evidence: each feature gets a weight per theme, log(P(theme | feature) / P(theme)), from how its activation is
   spread over the themes' documents: a feature that fires mostly on sports articles is strong evidence for the
   sports theme, one that fires everywhere is evidence for none.
3. A document's theme scores are the sum of its activations times that evidence (a naive-Bayes vote of its
   features) plus how close the document lies to each theme's centre (POSITION_WEIGHT per unit of cosine): the
   vote says why, the position keeps a document with few active features where its whole embedding places it, so
   another training's features seldom move it (theme agreement across seeds, BENCHMARKS.md section 7). Documents
   are re-assigned by their scores and the evidence recomputed until the assignment settles.
4. A feature belongs to the theme it is the strongest evidence for; a document to its strongest theme and to any
   theme with at least `member_share` of its probability.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from prisma_core.config_docs import CheckedConfig, setting
from prisma_core.progress import Progress, ProgressCallback, ignore_progress
from prisma_core.store.vectors import DocumentVectors, StoredVectors, unit_rows

if TYPE_CHECKING:  # scikit-learn is imported where themes are built: every view reads Themes, and its import
    from sklearn.cluster import KMeans  # takes 0.8 s of a fresh server's first view
    from sklearn.decomposition import PCA

STAGE = "themes"
NO_THEME = -1
_SEED = 0
"""Seeds k-means and the silhouette sample: the same codes always give the same themes."""
_SILHOUETTE_SAMPLE = 3000
_REFINE_ROUNDS = 3
_COMPONENTS = 50
SEPARATION_TOLERANCE = 0.05
"""Relative silhouette difference below which two numbers of themes count as separating the documents equally."""
_CANDIDATES = 12
"""Numbers of themes tried when choosing from the data (spread geometrically over the range)."""
_STARTS = 4
"""Independent k-means fits per number of themes (each the best of `_STARTS_EACH` starts): their agreement says whether
the grouping comes back."""
_STARTS_EACH = 4
AGREEMENT_FROM = 500
"""Documents (or sampled documents) from which the numbers of themes are narrowed by agreement between starts. On
fewer, starts disagree for want of documents more than for want of subjects (the 150-note demo: no number above 0.86,
0.98 only for 3 themes at 64 starts), and the number is chosen by separation alone."""
REPRODUCIBLE = 0.9
"""Mean adjusted Rand index between the kept fit and the other fits above which a number of themes counts as coming
back. Measured on the shared corpora (1,000 documents each at fp32, bf16 and int8, and the whole corpora): the desks
of BBC News at 5 themes agree at 0.99-1.0, a sixth group of AG News at 0.62-0.90."""
_SMOOTHING = 0.5
"""Pseudo-activation spread over the themes by their size, so a rarely active feature is weak evidence."""
POSITION_WEIGHT = 10.0
"""Log-odds a document's theme score gains per unit of cosine similarity to the theme's centre (in the space the
themes are seeded in). At 10, a document 0.1 closer to one centre than to another needs a feature vote one unit of
evidence stronger to leave it; at 0 themes follow the features' vote alone and move when another seed's features
do (theme agreement 0.81-0.85 instead of 0.95-0.98 on AG News and MTSamples)."""


PROBABILITY_ROWS = 65_536
"""Documents whose theme scores are computed at a time (float64 working copies of a slice only)."""
KMEANS_SAMPLE = 50_000
"""Documents k-means is fitted on when the vectors are read a slice at a time (`build_themes` on stored vectors)."""

_SAME_POINT_DECIMALS = 3
MIN_THEMES = 3
MAX_THEMES = 100
MAX_SUBTHEMES = 300


@dataclass(frozen=True)
class ThemeConfig(CheckedConfig):
    settings_name = "theme"

    n_themes: int | None = setting(
        None,
        minimum=2,
        maximum=MAX_THEMES,
        doc="Number of themes; empty chooses it from the data, between 3 and a maximum that grows with the "
        "corpus (about 12 for 1,000 documents, 50 for 100,000).",
    )
    member_share: float = setting(
        0.3,
        above=0,
        maximum=1,
        doc="A document also belongs to a second theme when that theme has at least this probability for it.",
    )
    n_subthemes: int | None = setting(
        None,
        minimum=2,
        maximum=MAX_SUBTHEMES,
        doc="Number of sub-themes, the level inside the themes; empty chooses it from the data, between 1.5 "
        "times the number of themes and the square root of twice the number of documents. Every theme "
        "keeps at least one.",
    )
    fit_share: float = setting(
        0.5,
        above=0,
        maximum=1,
        doc="A document fits its theme well when that theme has at least this probability for it; below it, "
        "its scores are split between themes (or it has no active feature) and it is counted among the "
        "documents that fit no theme well.",
    )


@dataclass(frozen=True)
class Themes:
    evidence: np.ndarray
    """[n_features, n_themes] float32: log(P(theme | feature) / P(theme)); 0 for features that never fire."""
    probabilities: np.ndarray
    """[n_documents, n_themes] float32: each document's theme probabilities (rows sum to 1; all 0 for a document
    without active features)."""
    member_share: float
    fit_share: float = ThemeConfig().fit_share

    @property
    def n_themes(self) -> int:
        return self.evidence.shape[1]

    def feature_theme(self) -> np.ndarray:
        """[n_features] int32: the theme each feature is the strongest evidence for, NO_THEME when it is evidence
        for none (it never fires, or fires alike everywhere)."""
        best = self.evidence.argmax(axis=1).astype(np.int32)
        return np.where(self.evidence.max(axis=1) > 0, best, NO_THEME).astype(np.int32)

    def strongest(self) -> np.ndarray:
        """[n_documents] int32: each document's most probable theme, NO_THEME without active features."""
        best = self.probabilities.argmax(axis=1).astype(np.int32)
        return np.where(self.probabilities.max(axis=1) > 0, best, NO_THEME).astype(np.int32)

    def members(self) -> sp.csr_matrix:
        """[n_documents, n_themes] 0/1: the themes each document belongs to (strongest, plus any with at least
        member_share probability)."""
        strongest = self.strongest()
        member = self.probabilities >= self.member_share
        has_theme = strongest >= 0
        member[np.flatnonzero(has_theme), strongest[has_theme]] = True
        return sp.csr_matrix(member, dtype=np.float32)

    def fits(self) -> np.ndarray:
        """[n_documents] bool: the documents that fit their strongest theme well (at least fit_share of their
        probability); the others have scores split between themes, or no active feature."""
        return self.probabilities.max(axis=1, initial=0.0) >= self.fit_share


def max_themes(n_documents: int) -> int:
    """Upper end of the automatic range: about 12 themes for 1,000 documents, 50 for 100,000."""
    return int(np.clip(round(12 * (max(n_documents, 1) / 1000) ** 0.31), MIN_THEMES + 1, 50))


def build_themes(
    codes: sp.spmatrix,
    doc_vectors: DocumentVectors,
    config: ThemeConfig = ThemeConfig(),
    progress: ProgressCallback = ignore_progress,
) -> Themes:
    """Themes of a run. codes: [n_documents, n_features] activations; doc_vectors: [n_documents, d] embeddings, in
    memory (k-means on every document) or stored (k-means on a seeded sample, every document then assigned a slice
    at a time: see `_sampled_assignment`)."""
    codes = sp.csr_matrix(codes, dtype=np.float32)
    counts = _candidate_counts(config, doc_vectors.shape[0])
    assignment, closeness = seed_clusters(doc_vectors, counts, progress)
    n_themes = int(assignment.max()) + 1
    position = POSITION_WEIGHT * closeness
    for _ in range(_REFINE_ROUNDS):
        evidence = feature_evidence(codes, assignment, n_themes)
        has_features = np.diff(codes.indptr) > 0
        refined = np.where(has_features, _best_scores(codes, evidence, position), assignment)
        if np.array_equal(refined, assignment):
            break
        assignment = refined
    order = _by_size(assignment, n_themes)
    evidence = feature_evidence(codes, assignment, n_themes)[:, order]
    probabilities = document_probabilities(codes, evidence, position[:, order])
    return Themes(evidence, probabilities, config.member_share, config.fit_share)


def themes_from_evidence(codes: sp.spmatrix, evidence: np.ndarray, member_share: float, fit_share: float) -> Themes:
    """Themes from stored evidence [n_features, n_themes] alone, for runs stored before their documents'
    probabilities were: the probabilities are recomputed from codes (the features' vote, without the position)."""
    codes = sp.csr_matrix(codes, dtype=np.float32)
    return Themes(np.asarray(evidence, np.float32), document_probabilities(codes, evidence), member_share, fit_share)


def seed_clusters(
    doc_vectors: DocumentVectors, counts: list[int], progress: ProgressCallback, best: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Spherical k-means labels [n_documents] for the number of clusters chosen among `counts` (see
    `_seed_assignment`; `best` picks the number that separates the documents best, else the largest that does
    about as well), and each document's cosine similarity to the centres [n_documents, n_clusters]. doc_vectors
    in memory are clustered whole, stored ones on a seeded sample (see `_sampled_assignment`)."""
    if isinstance(doc_vectors, StoredVectors):
        return _sampled_assignment(doc_vectors, counts, progress, best)
    points = _document_points(doc_vectors)
    model = _seed_assignment(points, counts, progress, best)
    return model.labels_, points @ unit_rows(model.cluster_centers_).T


def feature_evidence(codes: sp.csr_matrix, assignment: np.ndarray, n_themes: int) -> np.ndarray:
    """[n_features, n_themes] log(P(theme | feature) / P(theme)) from each feature's activation mass per theme."""
    onehot = sp.csr_matrix(
        (np.ones(len(assignment), np.float32), (np.arange(len(assignment)), assignment)),
        shape=(len(assignment), n_themes),
    )
    mass = np.asarray((codes.T @ onehot).todense(), dtype=np.float64)
    prior = np.maximum(mass.sum(axis=0), 1e-12) / max(mass.sum(), 1e-12)
    share = (mass + _SMOOTHING * prior) / (mass.sum(axis=1, keepdims=True) + _SMOOTHING)
    evidence = np.log(share / prior)
    evidence[mass.sum(axis=1) == 0] = 0.0
    return evidence.astype(np.float32)


def _best_scores(codes: sp.csr_matrix, evidence: np.ndarray, position: np.ndarray) -> np.ndarray:
    """[n_documents] each document's highest-scoring theme, PROBABILITY_ROWS documents at a time."""
    return np.concatenate([_scores(codes, evidence, position, start).argmax(axis=1) for start in _row_starts(codes)])


def _scores(codes: sp.csr_matrix, evidence: np.ndarray, position: np.ndarray | None, start: int) -> np.ndarray:
    """Theme scores [rows, n_themes] float64 of the PROBABILITY_ROWS documents from `start`: the features' vote, plus
    the position term [n_documents, n_themes] when there is one."""
    rows = slice(start, start + PROBABILITY_ROWS)
    scores = np.asarray(codes[rows] @ evidence, dtype=np.float64)
    return scores if position is None else scores + position[rows]


def _row_starts(codes: sp.csr_matrix) -> range:
    return range(0, max(codes.shape[0], 1), PROBABILITY_ROWS)


def document_probabilities(
    codes: sp.csr_matrix, evidence: np.ndarray, position: np.ndarray | None = None
) -> np.ndarray:
    """[n_documents, n_themes] float32, PROBABILITY_ROWS documents at a time."""
    probabilities = np.zeros((codes.shape[0], evidence.shape[1]), np.float32)
    for start in _row_starts(codes):
        rows = codes[start : start + PROBABILITY_ROWS]
        scores = _scores(codes, evidence, position, start)
        scores -= scores.max(axis=1, keepdims=True)
        weights = np.exp(scores)
        share = weights / weights.sum(axis=1, keepdims=True)
        share[np.diff(rows.indptr) == 0] = 0.0
        probabilities[start : start + len(share)] = share
    return probabilities


def _document_points(vectors: np.ndarray) -> np.ndarray:
    """Documents at unit length, corpus mean removed, on their first principal components (k-means and the
    silhouette then run several times faster at the same grouping), at unit length again."""
    unit = unit_rows(vectors)
    return _projected(_fitted_pca(unit), unit)


def _sampled_assignment(
    source: StoredVectors, counts: list[int], progress: ProgressCallback, best: bool
) -> tuple[np.ndarray, np.ndarray]:
    """k-means labels [n_documents] for a corpus read a slice at a time, and each document's cosine similarity to the
    centres [n_documents, n_themes]: the principal components and k-means are fitted on a seeded sample of
    KMEANS_SAMPLE documents, then every document goes to its nearest centre, one slice at a time. Memory: the sample,
    one slice and the similarities (as the probabilities), whatever the corpus size."""
    n_documents = source.shape[0]
    sample = np.sort(np.random.default_rng(_SEED).choice(n_documents, min(KMEANS_SAMPLE, n_documents), replace=False))
    unit = unit_rows(source.rows(sample))
    pca = _fitted_pca(unit)
    model = _seed_assignment(_projected(pca, unit), counts, progress, best)
    centres = unit_rows(model.cluster_centers_)
    labels, closeness = [], []
    for _, rows in source.slices():
        points = _projected(pca, unit_rows(rows))
        labels.append(model.predict(points))
        closeness.append(points @ centres.T)
    return np.concatenate(labels), np.concatenate(closeness)


def _fitted_pca(unit: np.ndarray) -> PCA:
    from sklearn.decomposition import PCA

    return PCA(n_components=min(_COMPONENTS, *unit.shape), random_state=_SEED).fit(unit)


def _projected(pca: PCA, unit: np.ndarray) -> np.ndarray:
    return unit_rows(pca.transform(unit)).astype(np.float32)


def _seed_assignment(points: np.ndarray, counts: list[int], progress: ProgressCallback, best: bool) -> KMeans:
    """The fitted k-means for the one number in `counts`, or for the number chosen among them from the data: the
    one that separates the documents best (cosine silhouette on a seeded sample) when `best` (sub-themes: one fit per
    number), else the largest whose separation is within SEPARATION_TOLERANCE of the best one among the numbers
    whose grouping comes back from independent starts (`_reproducible_fit`; from AGREEMENT_FROM points): separations
    that close are within the noise of a sampled silhouette, and merging two real subjects costs an analyst more than
    splitting one. points: the documents', or a sample's. There are never more themes than distinct points (59
    copies of one text and one other text make two themes, not three; copies embedded in different batches differ by
    float rounding, about 1e-5 here, so points are compared to 3 decimals)."""
    from sklearn.cluster import KMeans

    n_distinct = len(np.unique(points.round(_SAME_POINT_DECIMALS), axis=0))
    candidates = sorted({min(count, n_distinct) for count in counts})
    rng = np.random.default_rng(_SEED)
    sample = rng.choice(len(points), size=min(_SILHOUETTE_SAMPLE, len(points)), replace=False)
    by_agreement = not best and len(points) >= AGREEMENT_FROM
    found = []
    for done, n_themes in enumerate(candidates, start=1):
        if by_agreement:
            model, agreement = _reproducible_fit(points, n_themes)
        else:
            model, agreement = KMeans(n_themes, n_init=_STARTS_EACH, random_state=_SEED).fit(points), 1.0
        score = _silhouette(points[sample], model.labels_[sample]) if len(candidates) > 1 else 0.0
        found.append((score, agreement, model))
        progress(Progress(STAGE, done, len(candidates), f"Trying {n_themes} groups", {"separation": score}))
    if best:
        return max(found, key=lambda fit: fit[0])[2]
    kept = [fit for fit in found if fit[1] >= REPRODUCIBLE] or [max(found, key=lambda fit: fit[1])]
    top = max(score for score, _, _ in kept)
    return [model for score, _, model in kept if score >= top - SEPARATION_TOLERANCE * abs(top)][-1]


def _reproducible_fit(points: np.ndarray, n_themes: int) -> tuple[KMeans, float]:
    """The tightest of `_STARTS` k-means fits with different seeds, and how well the others agree with it (mean
    adjusted Rand index; 1.0 when every start finds the same groups)."""
    from sklearn.cluster import KMeans
    from sklearn.metrics import adjusted_rand_score

    fits = [
        KMeans(n_themes, n_init=_STARTS_EACH, random_state=_SEED * _STARTS + start).fit(points)
        for start in range(_STARTS)
    ]
    kept = min(fits, key=lambda fit: fit.inertia_)
    others = [adjusted_rand_score(kept.labels_, fit.labels_) for fit in fits if fit is not kept]
    return kept, float(np.mean(others))


def _candidate_counts(config: ThemeConfig, n_documents: int) -> list[int]:
    if config.n_themes is not None:
        return [min(config.n_themes, n_documents)]
    high = min(max_themes(n_documents), n_documents)
    low = min(MIN_THEMES, high)
    if high <= low:
        return [low]
    return sorted({round(low * (high / low) ** (i / (_CANDIDATES - 1))) for i in range(_CANDIDATES)})


def _silhouette(points: np.ndarray, labels: np.ndarray) -> float:
    from sklearn.metrics import silhouette_score

    if len(np.unique(labels)) < 2:
        return -1.0
    return float(silhouette_score(points, labels, metric="cosine"))


def _by_size(assignment: np.ndarray, n_themes: int) -> np.ndarray:
    """Theme ids ordered by decreasing number of documents, so theme 0 is the largest."""
    return np.argsort(-np.bincount(assignment, minlength=n_themes), kind="stable")
