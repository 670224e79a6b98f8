"""How bench.quality scores a run: recovery of known categories per level (best-F1, purity, coverage), duplicate
labels, label scores against the same labels shuffled, the baselines (k-means K, the probe, BERTopic) and how the
seeds' runs agree. Shared with bench.bounded_quality."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

SHUFFLE_SEED = 0
DECODER_MATCH = 0.7
"""A feature's direction matches another run's when their cosine is at least this."""


def stability(runs: list[Any]) -> dict[str, float]:
    """How the seeds' runs agree: recurring features, decoder match, theme agreement, and the FVU gap."""
    from sklearn.metrics import adjusted_rand_score

    from prisma_core.sae.recurrence import recurrence

    found = recurrence([run.codes for run in runs])
    pairs = [(a, b) for a in range(len(runs)) for b in range(a + 1, len(runs))]
    strongest = [run.themes.strongest() for run in runs]
    subtheme = [run.subthemes.assignment for run in runs]
    fvu_train = np.mean([run.record.metrics["fvu_train"] for run in runs])
    fvu_holdout = np.mean([run.record.metrics["fvu_holdout"] for run in runs])
    return {
        "recurring": found.share,
        "recurring_by_documents": found.share_by_documents,
        "median_best_correlation": found.median_best_correlation,
        "decoder_match": decoder_match(runs),
        "theme_agreement": float(np.mean([adjusted_rand_score(strongest[a], strongest[b]) for a, b in pairs])),
        "subtheme_agreement": float(np.mean([adjusted_rand_score(subtheme[a], subtheme[b]) for a, b in pairs])),
        "fvu_train": float(fvu_train),
        "fvu_holdout": float(fvu_holdout),
        "fvu_gap": float(fvu_holdout - fvu_train),
        "features": float(np.mean([run.codes.shape[1] for run in runs])),
    }


def decoder_match(runs: list[Any]) -> float:
    """Share of firing features whose direction is within cosine DECODER_MATCH of a feature of every other run."""
    shares = []
    for i, run in enumerate(runs):
        firing = np.diff(run.codes.tocsc().indptr) > 0
        best = np.min([(run.directions @ other.directions.T).max(axis=1) for j, other in enumerate(runs) if j != i], 0)
        shares.append(float((best[firing] >= DECODER_MATCH).mean()))
    return float(np.mean(shares))


def prisma_levels(run: Any) -> dict[str, tuple[sp.csr_matrix, list[str]]]:
    """level -> (membership [n_documents, n_units] 0/1, the units' labels)."""
    from prisma_core.concepts import analysis
    from prisma_core.pipeline import family_matrix

    strong = analysis.strong_codes(run.codes)
    live = np.flatnonzero(np.diff(strong.tocsc().indptr) > 0)
    family_members = (strong @ family_matrix([f.members for f in run.families], run.codes.shape[1])) > 0
    feature_labels = run.features.set_index("feature_id")["label"]
    return {
        "theme": (run.themes.members(), run.theme_info["label"].tolist()),
        "subtheme": (one_hot(np.maximum(run.subthemes.assignment, 0)), run.subtheme_info["label"].tolist()),
        "family": (sp.csr_matrix(family_members, dtype=np.float32), [f.label for f in run.families]),
        "feature": (sp.csr_matrix(strong[:, live] > 0, dtype=np.float32), feature_labels.loc[live].tolist()),
    }


def recovery(members: sp.spmatrix, categories: np.ndarray) -> dict[str, float]:
    names, category = np.unique(categories, return_inverse=True)
    truth = sp.csr_matrix(
        (np.ones(len(category)), (np.arange(len(category)), category)), shape=(len(category), len(names))
    )
    member = sp.csr_matrix(members, dtype=np.float64)
    member.data[:] = 1.0
    overlap = (truth.T @ member).toarray()  # [categories, units]
    unit_size = np.asarray(member.sum(axis=0)).ravel()
    category_size = np.asarray(truth.sum(axis=0)).ravel()
    f1 = 2 * overlap / np.maximum(unit_size[None, :] + category_size[:, None], 1)
    shown = unit_size > 0
    purity = overlap.max(axis=0)[shown].sum() / max(unit_size[shown].sum(), 1)
    return {
        "best_f1": float(f1.max(axis=1).mean()),
        "purity": float(purity),
        "coverage": float((np.diff(member.indptr) > 0).mean()),
        "shown": int(shown.sum()),
    }


def duplicates(labels: list[str]) -> int:
    counts = pd.Series(labels).value_counts()
    return int(counts[counts > 1].sum())


def label_scores(run: Any, vectors: np.ndarray, levels: dict) -> dict[str, tuple[float, float]]:
    """level -> (mean embedding score of the labels, mean score of the same labels shuffled across units)."""
    from prisma_core.interpret.label_scores import label_embedding_scores

    config = run.settings.embed
    scores = {}
    rng = np.random.default_rng(SHUFFLE_SEED)
    for level, (members, labels) in levels.items():
        units = list(range(len(labels)))
        real = label_embedding_scores(units, labels, members, vectors, config).scores
        shuffled = label_embedding_scores(units, list(rng.permutation(labels)), members, vectors, config).scores
        scores[level] = (float(np.nanmean(real)), float(np.nanmean(shuffled)))
    return scores


def baselines(
    vectors: np.ndarray, categories: np.ndarray, embedding_key: str, bertopic: bool, workspace: Any, dataset_id: str
) -> list[tuple[str, sp.csr_matrix]]:
    from sklearn.cluster import KMeans
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_predict

    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    n_categories = len(np.unique(categories))
    kmeans = KMeans(n_categories, n_init=10, random_state=0).fit_predict(unit)
    probe = cross_val_predict(LogisticRegression(max_iter=2000, C=10.0), unit, categories, cv=5)
    found = [("k-means K", one_hot(kmeans)), ("probe (ceiling)", one_hot(np.unique(probe, return_inverse=True)[1]))]
    if bertopic:
        texts = workspace.documents(dataset_id, ["position", "text"])["text"].tolist()
        found.append(("BERTopic", one_hot(bertopic_topics(texts, vectors))))
    return found


def bertopic_topics(texts: list[str], vectors: np.ndarray) -> np.ndarray:
    """BERTopic with default settings on the same vectors; outliers (-1) form one unit of their own."""
    from bertopic import BERTopic

    from prisma_core.embed import EmbedConfig, load_model

    config = EmbedConfig()
    model = BERTopic(embedding_model=load_model(config.model, "cpu", "fp32"))
    topics, _ = model.fit_transform(texts, vectors)
    return np.asarray(topics) + 1


def one_hot(labels: np.ndarray) -> sp.csr_matrix:
    return sp.csr_matrix(
        (np.ones(len(labels)), (np.arange(len(labels)), labels)), shape=(len(labels), labels.max() + 1)
    )
