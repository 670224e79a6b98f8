"""The run's analysis above the in-memory bound (issue 14): keyword labels, label scores and themes read the texts in
batches and the vectors a slice at a time, forced here on 300 real BBC articles by a tiny `vectors_memory_mb`."""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from bbc_openings import BbcOpenings

from prisma_core import pipeline
from prisma_core.concepts.themes import NO_THEME, ThemeConfig, build_themes
from prisma_core.embed import EmbedConfig, embed_texts, model_key
from prisma_core.interpret.keywords import (
    SEPARATOR,
    KeywordConfig,
    corpus_terms,
    keyword_labels,
    streamed_corpus_terms,
    top_document_members,
)
from prisma_core.interpret.label_scores import label_embedding_scores
from prisma_core.reading.runs import load_run
from prisma_core.sae import SAEConfig
from prisma_core.store import Workspace
from prisma_core.store.vectors import StoredVectors

TEXT_BATCH = 50
BOUNDED_SAE = SAEConfig(n_features=64, k=4, epochs=3, batch_size=32, vectors_memory_mb=0.01)
"""0.01 MB holds 6 vectors: every part of the run reads the 300 documents in batches."""


def embed(texts: list[str]) -> np.ndarray:
    return embed_texts(texts, EmbedConfig(batch_size=256))


@pytest.fixture(scope="module")
def bbc300(tmp_path_factory: pytest.TempPathFactory, bbc_openings: BbcOpenings):
    """300 BBC articles (60 per category, cut to their openings) ingested and embedded: the session's, copied, since
    a run is stored in the workspace here."""
    workspace = bbc_openings.copy(tmp_path_factory.mktemp("bounded") / "workspace")
    dataset_id = bbc_openings.dataset_id
    return workspace, dataset_id, workspace.documents(dataset_id, ["position", "text"])["text"].tolist()


@pytest.fixture(scope="module")
def bounded_run(bbc300):
    """A run trained and analysed above the bound, recording how the texts and vectors were read."""
    workspace, dataset_id, texts = bbc300
    reads = {"text batches": [], "whole texts": 0, "all vectors": 0}
    with pytest.MonkeyPatch.context() as patch:
        document_batches, documents, all_vectors = Workspace.document_batches, Workspace.documents, StoredVectors.all

        def small_batches(self, dataset_id, columns, rows=TEXT_BATCH) -> Iterator[pd.DataFrame]:
            for batch in document_batches(self, dataset_id, columns, TEXT_BATCH):
                if "text" in columns:  # training also scans (position, text_hash) for the passages it reads
                    reads["text batches"].append(len(batch))
                yield batch

        def counted_documents(self, dataset_id, columns=None):
            reads["whole texts"] += "text" in (columns or ["text"])
            return documents(self, dataset_id, columns)

        def counted_all(self):
            reads["all vectors"] += 1
            return all_vectors(self)

        patch.setattr(Workspace, "document_batches", small_batches)
        patch.setattr(Workspace, "documents", counted_documents)
        patch.setattr(StoredVectors, "all", counted_all)
        summary = pipeline.train_run(workspace, dataset_id, BOUNDED_SAE)
    return load_run(workspace, summary.run_id), texts, reads


def test_above_the_bound_texts_are_read_in_batches_and_the_vectors_never_whole(bounded_run):
    _, texts, reads = bounded_run
    assert reads["whole texts"] == 0 and reads["all vectors"] == 0
    assert max(reads["text batches"]) <= TEXT_BATCH
    # the vocabulary sample, the corpus counts, then the top documents of features, sub-themes, themes and families:
    # one scan each
    assert sum(reads["text batches"]) == 6 * len(texts)


def test_bounded_feature_labels_name_words_of_their_own_documents_and_are_unique(bounded_run):
    run, texts, _ = bounded_run
    active = run.features[run.features["density"] > 0]
    assert not active["label"].duplicated().any()
    frequent = active[active["density"] >= 5]
    named = frequent[~frequent["label"].str.startswith("(")]
    assert len(named) >= 0.8 * len(frequent)
    top = top_document_members(run.codes, KeywordConfig().n_top_documents)
    for feature, label in zip(named["feature_id"], named["label"], strict=True):
        documents = " ".join(texts[d] for d in top[feature].indices).lower()
        for term in label.split(SEPARATOR):
            words = re.sub(r" \(#\d+\)$", "", term).split()
            assert all(word in documents for word in words), (feature, label)
    held_out = active[active["n_strong"] >= 25]["score_embedding"]  # 20 shown to the labels, 5 left to score on
    assert len(held_out) and np.isfinite(held_out).all() and held_out.mean() > 0.6


def test_bounded_themes_cover_every_document_with_features(bounded_run):
    run, texts, _ = bounded_run
    strongest = run.themes.strongest()
    has_features = np.diff(run.codes.indptr) > 0
    assert len(strongest) == len(texts)
    assert (strongest[has_features] != NO_THEME).all()
    assert not run.theme_info["label"].duplicated().any()
    assert run.theme_info["n_documents"].sum() >= has_features.sum()


def test_streamed_terms_with_every_document_sampled_give_the_labels_of_terms_counted_at_once(bbc300):
    workspace, dataset_id, texts = bbc300
    vectors = workspace.vectors(dataset_id, model_key(EmbedConfig()))
    members = _category_members(workspace, dataset_id)

    def batches() -> Iterator[tuple[np.ndarray, list[str]]]:  # backwards: the scan's order must not matter
        for start in reversed(range(0, len(texts), TEXT_BATCH)):
            yield np.arange(start, min(start + TEXT_BATCH, len(texts))), texts[start : start + TEXT_BATCH]

    streamed = streamed_corpus_terms(batches, len(texts), KeywordConfig(), sample=len(texts))
    at_once = corpus_terms(texts, KeywordConfig())
    assert list(streamed.vocabulary) == list(at_once.vocabulary)
    np.testing.assert_array_equal(streamed.frequency, at_once.frequency)
    pd.testing.assert_frame_equal(
        keyword_labels(streamed, members, vectors, embed), keyword_labels(at_once, members, vectors, embed)
    )


def test_stored_vectors_read_in_slices_give_the_labels_scores_and_themes_of_vectors_in_memory(bbc300, bounded_run):
    workspace, dataset_id, texts = bbc300
    run, _, _ = bounded_run
    stored = workspace.stored_vectors(dataset_id, model_key(EmbedConfig()))
    vectors = stored.all()
    terms = corpus_terms(texts, KeywordConfig())
    members = _category_members(workspace, dataset_id)
    pd.testing.assert_frame_equal(
        keyword_labels(terms, members, stored, embed), keyword_labels(terms, members, vectors, embed)
    )
    features = run.features["feature_id"].tolist()
    labels = run.features["label"].tolist()
    from_store = label_embedding_scores(features, labels, run.codes, stored, EmbedConfig())
    in_memory = label_embedding_scores(features, labels, run.codes, vectors, EmbedConfig())
    np.testing.assert_allclose(from_store.scores, in_memory.scores, atol=1e-6)
    assert from_store.basis == in_memory.basis
    sampled = build_themes(run.codes, stored, ThemeConfig(n_themes=5)).strongest()
    whole = build_themes(run.codes, vectors, ThemeConfig(n_themes=5)).strongest()
    assert (sampled == whole).mean() > 0.95


def _category_members(workspace: Workspace, dataset_id: str) -> sp.csr_matrix:
    """[5, n_docs]: one unit per BBC category, holding its articles."""
    labels = pd.Categorical(workspace.metadata(dataset_id)["label"])
    columns = np.arange(len(labels))
    return sp.csr_matrix((np.ones(len(labels), np.float32), (labels.codes, columns)), shape=(5, len(labels)))
