"""Semantic search from vectors in memory (DocumentVectors) against LanceDB's exact search through the store."""

import numpy as np
import pandas as pd
import pytest
from small_run import SmallRun

from prisma_core import pipeline
from prisma_core.embed import embed_texts
from prisma_core.reading.explore import (
    DatasetDocuments,
    DocumentVectors,
    document_map,
    saved_document_map,
    search_documents,
)
from prisma_core.store import Workspace

QUERIES = ["the central bank raised interest rates", "a striker scored in the cup final", "new mobile phones"]


@pytest.fixture(scope="module")
def searched(small_run: SmallRun):
    workspace = Workspace(small_run.path)
    run = pipeline.load_run(workspace, small_run.run.run_id)
    vectors = workspace.vectors(small_run.dataset_id, run.record.embedding_key)
    return workspace, run, vectors


@pytest.mark.parametrize("query", QUERIES)
def test_in_memory_search_finds_the_stores_top_k(searched, query: str) -> None:
    workspace, run, vectors = searched
    query_vector = embed_texts([query], run.settings.embed)[0]
    found = DocumentVectors.from_vectors(vectors).nearest(query_vector, 10)
    store = workspace.search_documents(run.record.dataset_id, run.record.embedding_key, query_vector, 10)
    assert found["position"].tolist() == store["position"].tolist()
    assert found["distance"].to_numpy() == pytest.approx(store["distance"].to_numpy(), abs=1e-5)


def test_in_memory_search_is_exact_brute_force_cosine(searched) -> None:
    _, _, vectors = searched
    query = vectors[:5].mean(axis=0)
    cosine = vectors @ query / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(query))
    found = DocumentVectors.from_vectors(vectors).nearest(query, len(vectors) + 5)  # more than there are: all
    assert found["position"].tolist() == np.argsort(-cosine, kind="stable").tolist()
    assert found["distance"].to_numpy() == pytest.approx(1 - np.sort(cosine)[::-1], abs=1e-5)
    assert DocumentVectors.from_vectors(vectors).nearest(query, 0).empty


def test_document_vectors_are_unit_length_rows_in_position_order(searched) -> None:
    _, _, vectors = searched
    unit = DocumentVectors.from_vectors(vectors).unit
    assert unit.dtype == np.float32 and unit.shape == vectors.shape
    assert np.linalg.norm(unit, axis=1) == pytest.approx(1.0, abs=1e-5)
    assert np.linalg.norm(vectors, axis=1).std() > 0  # the stored vectors are not unit-norm themselves
    cosine_first_two = vectors[0] @ vectors[1] / (np.linalg.norm(vectors[0]) * np.linalg.norm(vectors[1]))
    assert unit[0] @ unit[1] == pytest.approx(cosine_first_two, abs=1e-5)


def test_search_documents_names_the_documents_found(searched) -> None:
    workspace, run, vectors = searched
    opened = DatasetDocuments.open(workspace, run.record.dataset_id)
    documents = opened.frame
    hits = search_documents(run, QUERIES[0], opened, DocumentVectors.from_vectors(vectors), 5)
    assert list(hits.columns) == ["position", "doc_id", "title", "text", "distance"]
    assert len(hits) == 5 and hits["distance"].is_monotonic_increasing
    by_position = documents.set_index("position")
    assert hits["doc_id"].tolist() == by_position.loc[hits["position"], "doc_id"].tolist()
    assert hits["text"].tolist() == by_position.loc[hits["position"], "text"].tolist()


def test_the_map_is_drawn_once_kept_in_the_workspace_and_deleted_with_its_dataset(small_run: SmallRun, tmp_path):
    """Issue 26: the first Home view of a run waited for t-SNE (32.7 s); the map is now drawn once per dataset and
    vector space, kept, and read back by every later view."""
    workspace = small_run.copy(tmp_path / "workspace")
    run = pipeline.load_run(workspace, small_run.run.run_id)
    dataset_id, space = run.record.dataset_id, run.record.embedding_key
    assert workspace.saved_document_map(dataset_id, space).empty
    events = []
    drawn = saved_document_map(workspace, dataset_id, space, events.append)
    assert [(event.stage, event.done, event.total) for event in events] == [("map", 0, 1), ("map", 1, 1)]
    assert drawn["position"].tolist() == list(range(run.codes.shape[0]))  # 60 documents: all of them
    pd.testing.assert_frame_equal(drawn, document_map(workspace.stored_vectors(dataset_id, space)))
    saved = workspace.saved_document_map(dataset_id, space)
    assert saved["position"].tolist() == drawn["position"].tolist()
    assert saved[["x", "y"]].to_numpy() == pytest.approx(drawn[["x", "y"]].to_numpy(), abs=1e-4)  # stored as float32

    events.clear()
    again = saved_document_map(workspace, dataset_id, space, events.append)
    assert events == [] and again.equals(saved)  # read back, not drawn again
    workspace.save_document_map(dataset_id, space, drawn)  # two sessions saving it at once: one copy stays
    assert len(workspace.saved_document_map(dataset_id, space)) == len(drawn)
    assert workspace.saved_document_map(dataset_id, "another|space").empty
    workspace.delete_dataset(dataset_id)
    assert workspace.db.open_table("maps").count_rows() == 0
