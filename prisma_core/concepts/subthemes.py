"""Sub-themes: the level inside the themes (the newsgroup inside "computers", the specialty inside "surgery").

Found after the themes, so their number changes without retraining, and nested in them:
1. Spherical k-means on the documents' embeddings (as the themes' seed), with the number given or chosen from the
   data: the number that separates the documents best (cosine silhouette on a seeded sample), between 1.5 times
   the number of themes and the square root of twice the number of documents (68 for 2,315 documents, 123 for
   7,600). Tried on MTSamples (40 specialties, 3 themes): the fewest numbers within 5% of the best (as themes take
   the largest) chose 31 sub-themes, best-F1 0.303; the best up to the square root of the number of documents, 48
   and 0.321; k-means with 40 clusters reaches 0.330. Tried and dropped: the silhouette inside each theme (so the
   themes' own separation does not count) chose the top of the range on AG News (123) and 46 on BBC, and sub-themes
   then agreed less across seeds (AG News ARI 0.69 against 0.96). Known weakness: when the themes are far apart
   (the three shared corpora pooled, 12,140 documents, 49 categories) the whole-corpus silhouette prefers few
   sub-themes (10; best-F1 0.159 against k-means with 49 clusters 0.190). The clusters are found on the whole
   corpus, not theme by theme, so a specialty is not cut in two where two themes meet (40 clusters: 0.326 nested
   this way, 0.319 when each theme is split on its own).
2. Each cluster belongs to the theme most of its documents belong to; a theme no cluster falls to gets one
   sub-theme of all its documents. Every sub-theme belongs to exactly one theme.
3. A document's sub-theme is the nearest centre among its own theme's sub-themes, so a document's sub-theme is
   always inside its theme; documents without a theme have no sub-theme.
4. Features get evidence per sub-theme as per theme (`feature_evidence`); a feature's sub-theme is the strongest
   among the sub-themes of its own theme.
Sub-themes are numbered theme by theme, largest first within a theme: sub-theme 0 is the largest of theme 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from prisma_core.concepts.themes import MAX_SUBTHEMES, NO_THEME, Themes, feature_evidence, seed_clusters
from prisma_core.progress import ProgressCallback, ignore_progress
from prisma_core.store.vectors import DocumentVectors

_MIN_SPLIT = 1.5
"""Sub-themes chosen from the data number at least this many times the themes."""


@dataclass(frozen=True)
class SubThemes:
    theme: np.ndarray
    """[n_subthemes] int32: the theme each sub-theme belongs to."""
    assignment: np.ndarray
    """[n_documents] int32: each document's sub-theme, NO_THEME for a document without a theme."""
    evidence: np.ndarray
    """[n_features, n_subthemes] float32: log(P(sub-theme | feature) / P(sub-theme)), as for themes."""

    @property
    def n_subthemes(self) -> int:
        return len(self.theme)

    def of_theme(self, theme: int) -> np.ndarray:
        """The ids of a theme's sub-themes, largest first."""
        return np.flatnonzero(self.theme == theme)

    def sizes(self) -> np.ndarray:
        """[n_subthemes] documents in each sub-theme."""
        assigned = self.assignment[self.assignment >= 0]
        return np.bincount(assigned, minlength=self.n_subthemes)

    def feature_subtheme(self, feature_theme: np.ndarray) -> np.ndarray:
        """[n_features] int32: each feature's strongest sub-theme among its theme's (`feature_theme`: the theme of
        each feature), NO_THEME for a feature without a theme or with no positive evidence there."""
        own = self.theme[None, :] == feature_theme[:, None]
        masked = np.where(own, self.evidence, -np.inf)
        best = masked.argmax(axis=1).astype(np.int32)
        strong = (feature_theme >= 0) & (masked.max(axis=1) > 0)
        return np.where(strong, best, NO_THEME).astype(np.int32)


def subtheme_counts(n_themes: int, n_documents: int, n_subthemes: int | None, n_features: int) -> list[int]:
    """The numbers of clusters tried: the one given, or a geometric spread from 1.5 times the number of themes to
    the square root of twice the number of documents; never so many that, with a sub-theme for each theme that owns
    no cluster, there would be more sub-themes than the `n_features` features that fire (the finer level is the
    features: a sub-theme is a group of them)."""
    most = max(1, min(n_documents, n_features - n_themes))
    if n_subthemes is not None:
        return [max(1, min(n_subthemes, most))]
    low = min(max(n_themes + 1, round(_MIN_SPLIT * n_themes)), most)
    high = min(max(low, round((2 * n_documents) ** 0.5)), MAX_SUBTHEMES, most)
    steps = 12
    return sorted({round(low * (high / low) ** (i / (steps - 1))) for i in range(steps)})


def build_subthemes(
    codes: sp.spmatrix,
    doc_vectors: DocumentVectors,
    themes: Themes,
    n_subthemes: int | None = None,
    progress: ProgressCallback = ignore_progress,
) -> SubThemes:
    """The sub-themes of a run's themes. codes: [n_documents, n_features]; doc_vectors: [n_documents, d]."""
    codes = sp.csr_matrix(codes, dtype=np.float32)
    firing = int((codes.getnnz(axis=0) > 0).sum())
    counts = subtheme_counts(themes.n_themes, codes.shape[0], n_subthemes, firing)
    clusters, closeness = seed_clusters(doc_vectors, counts, progress, best=True)
    strongest = themes.strongest()
    owner = _owners(clusters, strongest, closeness.shape[1], themes.n_themes)
    theme_of, assignment = nest_documents(owner, closeness, strongest, themes.n_themes)
    theme_of, assignment = _numbered(theme_of, assignment)
    placed = assignment >= 0
    evidence = np.zeros((codes.shape[1], len(theme_of)), np.float32)
    if placed.any():
        evidence = feature_evidence(codes[placed], assignment[placed], len(theme_of))
    return SubThemes(theme_of, assignment, evidence)


def _owners(clusters: np.ndarray, strongest: np.ndarray, n_clusters: int, n_themes: int) -> np.ndarray:
    """[n_clusters] the theme most of each cluster's documents belong to, NO_THEME for a cluster without any."""
    placed = strongest >= 0
    counts = np.zeros((n_clusters, max(n_themes, 1)), np.int64)
    np.add.at(counts, (clusters[placed], strongest[placed]), 1)
    return np.where(counts.sum(axis=1) > 0, counts.argmax(axis=1), NO_THEME)


def nest_documents(
    owner: np.ndarray, closeness: np.ndarray, strongest: np.ndarray, n_themes: int
) -> tuple[np.ndarray, np.ndarray]:
    """(theme of each sub-theme, sub-theme of each document): a document goes to the nearest centre among its
    theme's clusters; a theme that owns no cluster gets one sub-theme of all its documents."""
    theme_of = list(owner)
    assignment = np.full(len(strongest), NO_THEME, np.int32)
    for theme in range(n_themes):
        documents = np.flatnonzero(strongest == theme)
        columns = np.flatnonzero(owner == theme)
        if len(columns) == 0:
            theme_of.append(theme)
            assignment[documents] = len(theme_of) - 1
        else:
            assignment[documents] = columns[closeness[documents][:, columns].argmax(axis=1)]
    return np.asarray(theme_of, np.int32), assignment


def _numbered(theme_of: np.ndarray, assignment: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sub-themes without documents dropped, the rest numbered theme by theme, largest first within a theme."""
    sizes = np.bincount(assignment[assignment >= 0], minlength=len(theme_of))
    kept = np.flatnonzero(sizes > 0)
    order = kept[np.lexsort((kept, -sizes[kept], theme_of[kept]))]
    new_id = np.full(len(theme_of), NO_THEME, np.int32)
    new_id[order] = np.arange(len(order), dtype=np.int32)
    renumbered = np.where(assignment >= 0, new_id[np.maximum(assignment, 0)], NO_THEME).astype(np.int32)
    return theme_of[order].astype(np.int32), renumbered
