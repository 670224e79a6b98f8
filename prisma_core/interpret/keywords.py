"""Keyword labels without an LLM: the words and phrases a concept's documents share and the rest of the corpus lacks.

A concept (feature, family or theme) is represented by a "class" of documents: its strongest documents. Labels are
built in three steps:
1. Candidates: words and two-word phrases found in at least `min_class_share` of the class documents (never in just
   one, which keeps out names and debris of a single document), ranked by how over-represented their document
   frequency is: p_class * log(p_class / p_corpus).
2. Re-ranking (KeyBERT style): each candidate is embedded with the document model and scored by cosine to the
   concept's distinctive direction (mean of its documents minus mean of the corpus), so the label is what tells its
   documents apart in the space the concept lives in; maximal marginal relevance keeps the terms diverse
   ("fracture" and "fractures" never both).
3. Uniqueness: when two concepts would get the same label, the weaker one's last term is replaced by its best term
   that the stronger does not use, so the labels say how they differ.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer

from prisma_core.config_docs import CheckedConfig, setting
from prisma_core.store.schemas import KEYWORD_SOURCE

SEPARATOR = " · "
INACTIVE_LABEL = "(inactive feature)"
UNNAMED_LABEL = "(no shared words)"
_TOKEN = r"(?u)\b[^\W\d_\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]{3,24}\b"
"""Words of 3 to 24 letters: no numbers, no two-letter fragments, no letter runs such as a DNA sequence. Chinese
and Japanese characters are left out: those scripts do not separate words with spaces, so a run of them is a
phrase or a sentence, not a word (their units are named "no shared words"; an LLM label can name them)."""
MIN_LIFT = 2.0
"""A candidate term is at least this many times more common in the class than in the corpus: words common
everywhere ("said", "new", "patient") say nothing about a class, however often they appear in it."""
_SIMILAR_TERMS = 0.8
"""Cosine above which two candidate terms say the same thing (plural, spelling variant)."""

Embedder = Callable[[list[str]], np.ndarray]
"""Texts -> vectors [n, d] in the same space as the documents."""


@dataclass(frozen=True)
class KeywordConfig(CheckedConfig):
    settings_name = "keyword"

    n_top_documents: int = setting(20, minimum=1)
    """Strongest documents of a concept that form its class."""
    n_terms: int = setting(3, minimum=1)
    """Words or phrases in a label."""
    n_description_terms: int = 8
    """Words or phrases listed in the description."""
    n_candidates: int = setting(15, minimum=1)
    """Candidate terms per concept re-ranked with the embedding model."""
    min_class_share: float = setting(0.15, above=0, maximum=1)
    """A candidate term must appear in at least this share of the class documents (of n_top_documents of them, for
    a larger class such as a theme's) and in at least two."""
    diversity: float = setting(0.4, minimum=0, maximum=1)
    """Maximal marginal relevance weight: 0 picks the most relevant terms, higher values prefer varied terms."""
    max_vocabulary: int = 50_000
    """Most frequent words and phrases considered."""
    min_document_frequency: int = setting(2, minimum=1)
    """Words or phrases in fewer documents of the corpus are ignored."""


def top_document_members(codes: sp.spmatrix, n_top: int) -> sp.csr_matrix:
    """[n_units, n_docs] 0/1: the `n_top` strongest documents of each column of codes [n_docs, n_units]."""
    csc = sp.csc_matrix(codes)
    rows, cols = [], []
    for unit in range(csc.shape[1]):
        start, end = csc.indptr[unit], csc.indptr[unit + 1]
        values = csc.data[start:end]
        top = np.argsort(-values, kind="stable")[:n_top]
        top = top[values[top] > 0]
        rows.append(np.full(len(top), unit))
        cols.append(csc.indices[start:end][top])
    rows_all = np.concatenate(rows) if rows else np.empty(0, np.int64)
    cols_all = np.concatenate(cols) if cols else np.empty(0, np.int64)
    return sp.csr_matrix((np.ones(len(rows_all), np.float32), (rows_all, cols_all)), shape=(csc.shape[1], csc.shape[0]))


@dataclass(frozen=True)
class CorpusTerms:
    """The words and two-word phrases of a corpus (English stop words left out) and which documents contain them."""

    vocabulary: np.ndarray
    presence: sp.csr_matrix
    """[n_docs, vocab] 0/1."""


def corpus_terms(texts: Sequence[str], config: KeywordConfig) -> CorpusTerms:
    """Counting a corpus's terms is the costliest step of keyword labels (about 1 s per 1,000 news articles): a run
    labels its features, themes and families from one count."""
    vectorizer = CountVectorizer(
        stop_words="english",
        token_pattern=_TOKEN,
        ngram_range=(1, 2),
        binary=True,
        min_df=min(config.min_document_frequency, len(texts)),
        max_features=config.max_vocabulary,
        dtype=np.float32,
    )
    try:
        doc_terms = vectorizer.fit_transform(texts)
    except ValueError:  # no word at all (e.g. only numbers, or a script without spaces between words)
        return CorpusTerms(np.array([], dtype=object), sp.csr_matrix((len(texts), 0), dtype=np.float32))
    return CorpusTerms(vectorizer.get_feature_names_out(), doc_terms.tocsr())


def keyword_labels(
    corpus: Sequence[str] | CorpusTerms,
    members: sp.spmatrix,
    doc_vectors: np.ndarray,
    embed: Embedder,
    config: KeywordConfig = KeywordConfig(),
) -> pd.DataFrame:
    """One unique label per concept (row of members [n_units, n_docs], 0/1): unit, label, description, source.
    corpus: the documents' texts, or their terms counted once by `corpus_terms` with the same config."""
    members = sp.csr_matrix(members)
    terms = corpus if isinstance(corpus, CorpusTerms) else corpus_terms(corpus, config)
    vocabulary, doc_terms = terms.vocabulary, terms.presence
    candidates = _candidates(members, doc_terms, config)
    terms = sorted({int(t) for ranked in candidates for t in ranked})
    term_vectors = _unit_rows(embed([vocabulary[t] for t in terms])) if terms else np.zeros((0, doc_vectors.shape[1]))
    vector_of = dict(zip(terms, term_vectors, strict=True))
    directions = _distinctive_directions(members, doc_vectors)
    ranked = [_rerank(c, vector_of, directions[u], config.diversity) for u, c in enumerate(candidates)]
    labels = _unique_labels(ranked, np.asarray(members.sum(axis=1)).ravel(), vocabulary, config.n_terms)
    descriptions = [
        _description(r, vocabulary, n, config) for r, n in zip(ranked, np.diff(members.indptr), strict=True)
    ]
    return pd.DataFrame(
        {
            "unit": np.arange(members.shape[0], dtype=np.int32),
            "label": labels,
            "description": descriptions,
            "source": KEYWORD_SOURCE,
        }
    )


def _candidates(members: sp.csr_matrix, doc_terms: sp.csr_matrix, config: KeywordConfig) -> list[np.ndarray]:
    """Per unit, term ids shared by enough class documents, most over-represented first (at most n_candidates)."""
    class_size = np.diff(members.indptr).astype(np.float64)
    class_df = (members @ doc_terms).tocsr()
    corpus_rate = np.asarray(doc_terms.sum(axis=0)).ravel() / max(doc_terms.shape[0], 1)
    found = []
    for unit in range(members.shape[0]):
        start, end = class_df.indptr[unit], class_df.indptr[unit + 1]
        counts, term_ids = class_df.data[start:end], class_df.indices[start:end]
        rate = counts / max(class_size[unit], 1.0)
        needed = max(2.0, config.min_class_share * min(class_size[unit], config.n_top_documents))
        keep = (counts >= needed) & (rate >= MIN_LIFT * corpus_rate[term_ids])
        score = rate[keep] * np.log(rate[keep] / corpus_rate[term_ids[keep]])
        found.append(term_ids[keep][np.argsort(-score, kind="stable")[: config.n_candidates]])
    return found


def _distinctive_directions(members: sp.csr_matrix, doc_vectors: np.ndarray) -> np.ndarray:
    """[n_units, d] unit vectors: mean of a unit's documents minus the corpus mean (documents at unit length)."""
    unit_docs = _unit_rows(np.asarray(doc_vectors, dtype=np.float32))
    sizes = np.maximum(np.asarray(members.sum(axis=1)).ravel(), 1.0)
    means = np.asarray(members @ unit_docs) / sizes[:, None]
    return _unit_rows(means - unit_docs.mean(axis=0))


def _rerank(
    candidates: np.ndarray, vector_of: dict[int, np.ndarray], direction: np.ndarray, diversity: float
) -> list[int]:
    """Candidates in maximal-marginal-relevance order; near-synonyms of a chosen term are dropped."""
    remaining = [int(t) for t in candidates]
    relevance = {t: float(vector_of[t] @ direction) for t in remaining}
    chosen: list[int] = []
    while remaining:

        def marginal(term: int) -> float:
            overlap = max((float(vector_of[term] @ vector_of[c]) for c in chosen), default=0.0)
            return (1 - diversity) * relevance[term] - diversity * overlap

        best = max(remaining, key=marginal)
        remaining.remove(best)
        if all(float(vector_of[best] @ vector_of[c]) < _SIMILAR_TERMS for c in chosen):
            chosen.append(best)
    return chosen


def _unique_labels(ranked: list[list[int]], strength: np.ndarray, vocabulary: np.ndarray, n_terms: int) -> list[str]:
    """Labels of n_terms terms; stronger units choose first, a weaker unit whose label is taken swaps in its next
    best unused term (or, with none left, its id), so no two units share a label."""
    labels = [""] * len(ranked)
    taken: set[str] = set()
    for unit in np.argsort(-strength, kind="stable"):
        terms = [str(vocabulary[t]) for t in ranked[unit]]
        if not terms:
            labels[unit] = _empty_label(strength[unit], unit)
            continue
        label = SEPARATOR.join(_readable_order(terms[:n_terms]))
        spare = iter(terms[n_terms:])
        while label in taken:
            extra = next(spare, None)
            head = terms[: max(1, min(n_terms, len(terms)) - 1)]
            label = SEPARATOR.join([*head, extra]) if extra else f"{SEPARATOR.join(terms[:n_terms])} (#{unit})"
        taken.add(label)
        labels[unit] = label
    return labels


def _readable_order(terms: list[str]) -> list[str]:
    """A phrase first reads better than a word it contains ("heart failure · heart" -> keep both, phrase first)."""
    return sorted(terms, key=lambda term: -len(re.findall(r"\w+", term)))


def _empty_label(strength: float, unit: int) -> str:
    return INACTIVE_LABEL if strength == 0 else f"{UNNAMED_LABEL} #{unit}"


def _description(ranked: list[int], vocabulary: np.ndarray, n_documents: int, config: KeywordConfig) -> str:
    if n_documents == 0:
        return "Never active on this dataset."
    if not ranked:
        return "Its strongest documents share no distinctive word (read them to name it, or label it with an LLM)."
    terms = [str(vocabulary[t]) for t in ranked[: config.n_description_terms]]
    return "Words its strongest documents share: " + ", ".join(terms) + "."


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    return matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
