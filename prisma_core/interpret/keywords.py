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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import scipy.sparse as sp

from prisma_core.config_docs import CheckedConfig, setting
from prisma_core.store.datasets import Datasets
from prisma_core.store.schemas import KEYWORD_SOURCE
from prisma_core.store.vectors import DocumentVectors, unit_rows, vector_slices

if TYPE_CHECKING:
    from sklearn.feature_extraction.text import CountVectorizer

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
MIN_WORDED_SHARE = 0.5
"""A class is named by words only when at least this share of its documents hold words of the vocabulary: else the
words of a minority would name it (6 DNA documents naming a theme of 40 Chinese ones, whose script has no spaces)."""
_SIMILAR_TERMS = 0.8
"""Cosine above which two candidate terms say the same thing (plural, spelling variant)."""

Embedder = Callable[[list[str]], np.ndarray]
"""Texts -> vectors [n, d] in the same space as the documents."""


@dataclass(frozen=True)
class KeywordConfig(CheckedConfig):
    """How a concept's keyword label is found, the settings in the order they act: the corpus vocabulary, the class
    of the concept's strongest documents, the candidate terms common in that class and rare elsewhere, their
    re-ranking with the embedding model, and the label and description written from them."""

    settings_name = "keyword"

    max_vocabulary: int = setting(
        50_000, minimum=1, maximum=10_000_000, doc="Most frequent words and phrases considered."
    )
    min_document_frequency: int = setting(
        2, minimum=1, maximum=1_000_000, doc="Words or phrases in fewer documents of the corpus are ignored."
    )
    n_top_documents: int = setting(
        20, minimum=1, maximum=100_000, doc="Strongest documents of a concept that form its class."
    )
    min_class_share: float = setting(
        0.15,
        above=0,
        maximum=1,
        doc="A candidate term must appear in at least this share of the class documents (of n_top_documents "
        "of them, for a larger class such as a theme's) and in at least two.",
    )
    n_candidates: int = setting(
        15, minimum=1, maximum=100_000, doc="Candidate terms per concept re-ranked with the embedding model."
    )
    diversity: float = setting(
        0.4,
        minimum=0,
        maximum=1,
        doc="Maximal marginal relevance weight: 0 picks the most relevant terms, higher values prefer varied terms.",
    )
    n_terms: int = setting(3, minimum=1, maximum=20, doc="Words or phrases in a label.")
    n_description_terms: int = setting(8, minimum=1, maximum=100_000, doc="Words or phrases listed in the description.")


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


TextBatches = Callable[[], Iterator[tuple[np.ndarray, list[str]]]]
"""Each call scans a corpus once: (positions [m], their texts) a batch at a time, in any order."""

VOCABULARY_SAMPLE = 20_000
"""Documents whose words make the vocabulary of a corpus counted in batches (`streamed_corpus_terms`)."""
DIRECTION_ROWS = 16_384
"""Stored vectors read at a time for the concepts' directions: with their unit-length copies about 100 MB (65,536 at
a time took 400 MB)."""
CLASS_SAMPLE = 2_000
"""Documents of a larger class (a theme's) whose words are counted, for a corpus counted in batches."""


@dataclass(frozen=True)
class CorpusTerms:
    """The words and two-word phrases of a corpus (English stop words left out), in how many documents each is, and
    which terms the documents of a class contain."""

    vocabulary: np.ndarray
    frequency: np.ndarray
    """[vocab] documents of the corpus containing each term."""
    n_documents: int
    presence_of: Callable[[np.ndarray], sp.csr_matrix]
    """Positions [m] (ascending) -> [m, vocab] 0/1: the terms of those documents."""
    class_sample: int | None = None
    """At most this many documents of a class are read (a seeded sample); None reads them all."""


def corpus_terms(texts: Sequence[str], config: KeywordConfig) -> CorpusTerms:
    """Counting a corpus's terms is the costliest step of keyword labels (about 1 s per 1,000 news articles): a run
    labels its features, themes and families from one count."""
    vectorizer = _vectorizer(config, len(texts))
    try:
        presence = vectorizer.fit_transform(texts).tocsr()
    except ValueError:  # no word at all (e.g. only numbers, or a script without spaces between words)
        return _no_terms(len(texts))
    frequency = np.asarray(presence.sum(axis=0)).ravel()
    return CorpusTerms(vectorizer.get_feature_names_out(), frequency, len(texts), lambda positions: presence[positions])


def streamed_corpus_terms(
    batches: TextBatches, n_documents: int, config: KeywordConfig, sample: int = VOCABULARY_SAMPLE
) -> CorpusTerms:
    """The terms of a corpus too large to hold, read `batches` at a time: the vocabulary is chosen on a seeded
    sample of `sample` documents, then counted over every document; a class's terms are read when asked for (one
    scan), at most CLASS_SAMPLE documents of it. Memory: the sample's texts once, then one batch at a time."""
    chosen = np.sort(np.random.default_rng(0).choice(n_documents, size=min(sample, n_documents), replace=False))
    vectorizer = _vectorizer(config, len(chosen))
    try:
        vectorizer.fit(_texts_at(batches, chosen))
    except ValueError:
        return _no_terms(n_documents)
    frequency = np.zeros(len(vectorizer.vocabulary_), np.float32)
    for _, texts in batches():
        frequency += np.asarray(vectorizer.transform(texts).sum(axis=0), dtype=np.float32).ravel()

    def presence_of(positions: np.ndarray) -> sp.csr_matrix:
        return vectorizer.transform(_texts_at(batches, positions)).tocsr()

    return CorpusTerms(vectorizer.get_feature_names_out(), frequency, n_documents, presence_of, CLASS_SAMPLE)


def _vectorizer(config: KeywordConfig, n_documents: int) -> CountVectorizer:
    # imported here: every view reads KeywordConfig (a run's settings), and scikit-learn takes 0.8 s to import
    from sklearn.feature_extraction.text import CountVectorizer

    return CountVectorizer(
        stop_words="english",
        token_pattern=_TOKEN,
        ngram_range=(1, 2),
        binary=True,
        min_df=min(config.min_document_frequency, n_documents),
        max_features=config.max_vocabulary,
        dtype=np.float32,
    )


def _no_terms(n_documents: int) -> CorpusTerms:
    return CorpusTerms(
        np.array([], dtype=object),
        np.zeros(0, np.float32),
        n_documents,
        lambda positions: sp.csr_matrix((len(positions), 0), dtype=np.float32),
    )


def text_batches(documents: Datasets, dataset_id: str) -> TextBatches:
    """Scans of a stored dataset's texts, a batch of the documents table at a time."""

    def batches() -> Iterator[tuple[np.ndarray, list[str]]]:
        for batch in documents.document_batches(dataset_id, ["position", "text"]):
            yield batch["position"].to_numpy(), batch["text"].tolist()

    return batches


def _texts_at(batches: TextBatches, positions: np.ndarray) -> list[str]:
    """The texts at these positions (ascending, distinct), in that order, from one scan keeping only them."""
    found: dict[int, str] = {}
    for batch_positions, texts in batches():
        for i in np.flatnonzero(np.isin(batch_positions, positions)):
            found[int(batch_positions[i])] = texts[i]
    return [found[int(position)] for position in positions]


def keyword_labels(
    corpus: Sequence[str] | CorpusTerms,
    members: sp.spmatrix,
    doc_vectors: DocumentVectors,
    embed: Embedder,
    config: KeywordConfig = KeywordConfig(),
) -> pd.DataFrame:
    """One unique label per concept (row of members [n_units, n_docs], 0/1): unit, label, description, source.
    corpus: the documents' texts, or their terms counted once by `corpus_terms` (or `streamed_corpus_terms`) with
    the same config. doc_vectors: in memory, or read a slice at a time."""
    members = sp.csr_matrix(members)
    terms = corpus if isinstance(corpus, CorpusTerms) else corpus_terms(corpus, config)
    vocabulary = terms.vocabulary
    candidates = _candidates(members, terms, config)
    chosen = sorted({int(t) for ranked in candidates for t in ranked})
    dim = doc_vectors.shape[1]
    term_vectors = unit_rows(embed([vocabulary[t] for t in chosen])) if chosen else np.zeros((0, dim))
    vector_of = dict(zip(chosen, term_vectors, strict=True))
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


def _candidates(members: sp.csr_matrix, terms: CorpusTerms, config: KeywordConfig) -> list[np.ndarray]:
    """Per unit, term ids shared by enough class documents, most over-represented first (at most n_candidates)."""
    members = _class_sample(members, terms.class_sample)
    read = np.unique(members.indices)
    class_size = np.diff(members.indptr).astype(np.float64)
    presence = terms.presence_of(read)
    class_df = (members[:, read] @ presence).tocsr()
    worded = members[:, read] @ (np.diff(presence.indptr) > 0).astype(np.float64)  # per unit: documents with words
    corpus_rate = terms.frequency / max(terms.n_documents, 1)
    found = []
    for unit in range(members.shape[0]):
        if worded[unit] < MIN_WORDED_SHARE * class_size[unit]:
            found.append(np.empty(0, np.int64))
            continue
        start, end = class_df.indptr[unit], class_df.indptr[unit + 1]
        counts, term_ids = class_df.data[start:end], class_df.indices[start:end]
        rate = counts / max(class_size[unit], 1.0)
        needed = max(2.0, config.min_class_share * min(class_size[unit], config.n_top_documents))
        keep = (counts >= needed) & (rate >= MIN_LIFT * corpus_rate[term_ids])
        score = rate[keep] * np.log(rate[keep] / corpus_rate[term_ids[keep]])
        found.append(term_ids[keep][np.argsort(-score, kind="stable")[: config.n_candidates]])
    return found


def _class_sample(members: sp.csr_matrix, most: int | None) -> sp.csr_matrix:
    """members with each class cut to a seeded sample of at most `most` documents (unchanged when None)."""
    if most is None or np.diff(members.indptr).max(initial=0) <= most:
        return members
    rng = np.random.default_rng(0)
    rows = [np.sort(rng.permutation(members.indices[s:e])[:most]) for s, e in pairwise(members.indptr)]
    units = np.repeat(np.arange(members.shape[0]), [len(r) for r in rows])
    documents = np.concatenate(rows) if rows else np.empty(0, np.int64)
    return sp.csr_matrix((np.ones(len(units), np.float32), (units, documents)), shape=members.shape)


def _distinctive_directions(members: sp.csr_matrix, doc_vectors: DocumentVectors) -> np.ndarray:
    """[n_units, d] unit vectors: mean of a unit's documents minus the corpus mean (documents at unit length); the
    sums are taken over slices of the vectors, so stored vectors are never all in memory."""
    sums = np.zeros((members.shape[0], doc_vectors.shape[1]), np.float32)
    corpus_sum = np.zeros(doc_vectors.shape[1], np.float32)
    for start, vectors in vector_slices(doc_vectors, DIRECTION_ROWS):
        unit_docs = unit_rows(np.asarray(vectors, dtype=np.float32))
        sums += np.asarray(members[:, start : start + len(unit_docs)] @ unit_docs)
        corpus_sum += unit_docs.sum(axis=0)
    sizes = np.maximum(np.asarray(members.sum(axis=1)).ravel(), 1.0)
    return unit_rows(sums / sizes[:, None] - corpus_sum / doc_vectors.shape[0])


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
