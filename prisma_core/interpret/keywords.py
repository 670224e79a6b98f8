"""Keyword labels without an LLM: the distinctive terms of a feature's top documents (c-TF-IDF style).

Each feature's top-activating documents form one "class" (as topics do in c-TF-IDF). A term scores
p_class(t) * log(p_class(t) / p_corpus(t)), its term frequency weighted by how over-represented it is in the class
compared with the whole corpus. Plain c-TF-IDF's idf, log(1 + A / tf_t), still ranks words such as "said" or "year"
first when a class is a few dozen documents; the log-ratio sends every word used at its corpus rate to zero.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer

KEYWORD_SOURCE = "keywords"
INACTIVE_LABEL = "(inactive feature)"


@dataclass(frozen=True)
class KeywordConfig:
    n_top_documents: int = 20
    """Top-activating documents per feature that form its class."""
    n_terms: int = 3
    """Terms in the label."""
    n_description_terms: int = 10
    """Terms listed in the description."""
    max_vocabulary: int = 30_000
    min_document_frequency: int = 2


def _top_document_membership(codes: sp.csr_matrix, n_top: int) -> sp.csr_matrix:
    """[n_features, n_docs] weights: each feature's top documents, weighted by activation / max activation."""
    csc = codes.tocsc()
    rows, cols, weights = [], [], []
    for feature in range(csc.shape[1]):
        start, end = csc.indptr[feature], csc.indptr[feature + 1]
        if start == end:
            continue
        values = csc.data[start:end]
        top = np.argsort(-values, kind="stable")[:n_top]
        rows.append(np.full(len(top), feature))
        cols.append(csc.indices[start:end][top])
        weights.append(values[top] / values[top].max())
    if not rows:
        return sp.csr_matrix((csc.shape[1], csc.shape[0]), dtype=np.float32)
    return sp.csr_matrix(
        (np.concatenate(weights), (np.concatenate(rows), np.concatenate(cols))),
        shape=(csc.shape[1], csc.shape[0]),
    )


def _distinctiveness(class_terms: sp.csr_matrix, corpus_terms: np.ndarray) -> sp.csr_matrix:
    """[n_features, vocab] scores p_class * log(p_class / p_corpus); only over-represented terms stay non-zero."""
    words_per_class = np.asarray(class_terms.sum(axis=1)).ravel()
    rates = (sp.diags(1.0 / np.maximum(words_per_class, 1e-12)) @ class_terms).tocsr()
    corpus_rate = corpus_terms / max(corpus_terms.sum(), 1.0)
    rates.data = rates.data * np.log(rates.data / corpus_rate[rates.indices])
    rates.data[rates.data < 0] = 0
    rates.eliminate_zeros()
    return rates


def keyword_labels(texts: Sequence[str], codes: sp.csr_matrix, config: KeywordConfig = KeywordConfig()) -> pd.DataFrame:
    """One label per feature: feature_id, label, description, source="keywords"."""
    vectorizer = CountVectorizer(
        stop_words="english",
        token_pattern=r"(?u)\b[^\W\d_][^\W\d_]+\b",
        min_df=min(config.min_document_frequency, len(texts)),
        max_features=config.max_vocabulary,
    )
    doc_terms = vectorizer.fit_transform(texts).astype(np.float32)
    vocabulary = vectorizer.get_feature_names_out()
    membership = _top_document_membership(codes, config.n_top_documents)
    scores = _distinctiveness(membership @ doc_terms, np.asarray(doc_terms.sum(axis=0)).ravel())
    labels, descriptions = [], []
    for feature in range(codes.shape[1]):
        row = scores.getrow(feature)
        if row.nnz == 0:
            labels.append(INACTIVE_LABEL)
            descriptions.append("This feature never fires on this dataset.")
            continue
        order = np.argsort(-row.data, kind="stable")
        terms = vocabulary[row.indices[order[: config.n_description_terms]]]
        labels.append(" · ".join(terms[: config.n_terms]))
        descriptions.append("Distinctive words of its top documents: " + ", ".join(terms) + ".")
    return pd.DataFrame(
        {
            "feature_id": np.arange(codes.shape[1], dtype=np.int32),
            "label": labels,
            "description": descriptions,
            "source": KEYWORD_SOURCE,
        }
    )


def family_keyword_label(parent_label: str, child_labels: Sequence[str], n_terms: int = 3) -> str:
    """A family name from its members' keyword labels: the parent's terms first, then the commonest child terms."""
    parent_terms = [t for t in parent_label.split(" · ") if t]
    child_terms = Counter(t for label in child_labels for t in label.split(" · ") if t and t not in parent_terms)
    terms = parent_terms[:2] + [term for term, _ in child_terms.most_common(n_terms)]
    return " · ".join(terms[:n_terms]) or parent_label
