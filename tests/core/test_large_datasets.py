"""Reading a large dataset the bounded way: documents by position or id, the size threshold, the run's codes read in
batches, and search, sample and map through the store giving what the in-memory path gives, on the small real run."""

import numpy as np
import pandas as pd
import pytest
from small_run import SmallRun

from prisma_core import pipeline
from prisma_core.errors import SettingsError
from prisma_core.pipeline.export import export_run
from prisma_core.reading.explore import DatasetDocuments, DocumentVectors, document_map, search_documents
from prisma_core.reading.runs import read_codes
from prisma_core.store import Workspace
from prisma_core.store.datasets import LARGE_DATASET, LARGE_DATASET_ENV, SHOWN_COLUMNS, is_large, sample_positions


@pytest.fixture(scope="module")
def opened(small_run: SmallRun):
    workspace = Workspace(small_run.path)
    run = pipeline.load_run(workspace, small_run.run.run_id)
    every = workspace.documents(small_run.dataset_id, SHOWN_COLUMNS)
    return workspace, small_run.dataset_id, run, every


@pytest.fixture
def both(opened, monkeypatch: pytest.MonkeyPatch) -> tuple[DatasetDocuments, DatasetDocuments]:
    """The same 60 documents opened as a small dataset (in memory) and as a large one (threshold lowered to 10)."""
    workspace, dataset_id, _, _ = opened
    small = DatasetDocuments.open(workspace, dataset_id)
    monkeypatch.setenv(LARGE_DATASET_ENV, "10")
    return small, DatasetDocuments.open(workspace, dataset_id)


def test_the_threshold_is_one_constant_that_the_environment_can_lower(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LARGE_DATASET_ENV, raising=False)
    assert not is_large(LARGE_DATASET - 1)
    assert is_large(LARGE_DATASET) and is_large(1_000_000)
    monkeypatch.setenv(LARGE_DATASET_ENV, "50")
    assert is_large(60) and not is_large(49)


def test_documents_at_positions_come_in_the_order_given_repeats_included(opened) -> None:
    workspace, dataset_id, _, every = opened
    positions = [41, 3, 59, 3, 0]
    found = workspace.documents_at(dataset_id, positions)
    pd.testing.assert_frame_equal(found, every.iloc[positions].reset_index(drop=True))
    assert workspace.documents_at(dataset_id, []).empty


def test_documents_at_reads_more_positions_than_one_filter_names(opened, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace, dataset_id, _, every = opened
    monkeypatch.setattr("prisma_core.store.datasets.POSITIONS_PER_QUERY", 7)
    positions = np.arange(59, -1, -1)
    pd.testing.assert_frame_equal(
        workspace.documents_at(dataset_id, positions), every.iloc[positions].reset_index(drop=True)
    )


def test_documents_found_by_id_and_ids_suggested_by_their_start(opened) -> None:
    workspace, dataset_id, _, every = opened
    wanted = every["doc_id"].iloc[[12, 5]].tolist()
    found = workspace.documents_with_ids(dataset_id, [*wanted, "no such id", "it's"])
    pd.testing.assert_frame_equal(found, every.iloc[[5, 12]].reset_index(drop=True))
    first = every["doc_id"].iloc[0]
    suggested = workspace.doc_ids_starting(dataset_id, first[:-1], 100)
    assert first in suggested
    assert all(doc_id.startswith(first[:-1]) for doc_id in suggested)
    assert workspace.doc_ids_starting(dataset_id, "%", 10) == []  # a wildcard typed is a character, not a pattern
    assert workspace.doc_ids_starting(dataset_id, "_", 10) == []


def test_a_large_dataset_reads_what_a_small_one_holds(both, opened) -> None:
    small, large = both
    _, _, _, every = opened
    assert small.frame is not None and not small.large
    assert large.frame is None and large.large and large.n_documents == 60
    positions = np.array([8, 30, 8, 2])
    pd.testing.assert_frame_equal(large.at(positions), small.at(positions))
    doc_id = every["doc_id"].iloc[33]
    pd.testing.assert_frame_equal(large.with_id(doc_id), small.with_id(doc_id))
    assert large.with_id("no such id").empty and small.with_id("no such id").empty
    pd.testing.assert_frame_equal(large.sample(25, seed=3), small.sample(25, seed=3))
    assert large.sample(25, seed=3)["position"].tolist() == sample_positions(60, 25, 3).tolist()
    assert len(large.sample(1000)) == 60  # more than there are: all of them
    frame = pd.DataFrame({"position": [4, 1], "value": [0.5, 0.25]})
    pd.testing.assert_frame_equal(large.beside(frame), small.beside(frame))
    assert large.beside(frame)["text"].tolist() == every["text"].iloc[[4, 1]].tolist()


@pytest.mark.parametrize("query", ["the central bank raised interest rates", "a striker scored in the cup final"])
def test_searching_a_large_dataset_in_lancedb_finds_what_the_in_memory_search_finds(both, opened, query) -> None:
    small, large = both
    workspace, dataset_id, run, _ = opened
    vectors = DocumentVectors.from_vectors(workspace.vectors(dataset_id, run.record.embedding_key))
    in_memory = search_documents(run, query, small, vectors, 10)
    in_store = search_documents(run, query, large, None, 10)
    assert in_store["doc_id"].tolist() == in_memory["doc_id"].tolist()
    assert in_store["text"].tolist() == in_memory["text"].tolist()
    assert in_store["distance"].to_numpy() == pytest.approx(in_memory["distance"].to_numpy(), abs=1e-5)


def test_the_runs_codes_read_in_batches_equal_the_whole_table_read_at_once(opened, monkeypatch) -> None:
    workspace, _, run, _ = opened
    run_id = run.record.run_id
    n_docs, n_features = run.codes.shape
    n_rows, batches = workspace.activations.batches(run_id)
    assert len(list(batches)) == 1  # the whole table at once: far fewer rows than ACTIVATION_ROWS
    expected = read_codes(workspace, run_id, n_docs, n_features)
    monkeypatch.setattr("prisma_core.store.artefacts.ACTIVATION_ROWS", 50)
    assert len(list(workspace.activations.batches(run_id)[1])) > 1  # many batches
    codes = read_codes(workspace, run_id, n_docs, n_features)
    k = run.record.config["sae"]["k"]
    assert codes.nnz == expected.nnz == n_rows and (np.diff(codes.indptr) <= k).all()
    assert (codes != expected).nnz == 0
    assert (run.codes != expected).nnz == 0


def test_the_map_reads_only_its_sample_from_the_stored_vectors_and_draws_the_same_map(opened) -> None:
    workspace, dataset_id, run, _ = opened
    stored = workspace.stored_vectors(dataset_id, run.record.embedding_key)
    in_memory = document_map(workspace.vectors(dataset_id, run.record.embedding_key), max_points=40)
    from_store = document_map(stored, max_points=40)
    assert from_store["position"].tolist() == sample_positions(60, 40).tolist()
    pd.testing.assert_frame_equal(from_store, in_memory)


def test_the_export_writes_every_activation_a_slice_of_documents_at_a_time(opened, tmp_path, monkeypatch) -> None:
    workspace, _, run, every = opened
    monkeypatch.setattr("prisma_core.pipeline.export.EXPORT_ROWS", 7)  # 60 documents in 9 slices
    export_run(workspace, run.record.run_id, tmp_path / "out")
    written = pd.read_parquet(tmp_path / "out" / "activations.parquet")
    coo = run.codes.tocoo()
    expected = pd.DataFrame(
        {"doc_id": every["doc_id"].to_numpy()[coo.row], "feature_id": coo.col.astype(np.int32), "value": coo.data}
    )
    pd.testing.assert_frame_equal(written, expected)


@pytest.mark.parametrize("setting", ["ten", "-5", "0", "1e5"])
def test_a_threshold_that_is_no_whole_number_is_a_clear_settings_error(monkeypatch, setting):
    monkeypatch.setenv(LARGE_DATASET_ENV, setting)
    with pytest.raises(SettingsError, match="PRISMA_LARGE_DATASET must be a whole number"):
        is_large(10)
