"""The app on a large dataset: the small real run (60 BBC articles) with the size threshold lowered to 10 documents,
so every page takes the bounded path (documents read when shown, a document found by its id, search in LanceDB,
statistics on a sample). What the analyst sees is checked against the core's in-memory answers."""

from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest
from app_helpers import new_app, open_page, refracted_text, table, tables, texts
from small_run import SmallRun

from prisma_core import pipeline
from prisma_core.embed import EmbedConfig, load_model, plan_chunks
from prisma_core.reading.explore import DatasetDocuments, DocumentVectors, refract_document, search_documents
from prisma_core.store import WORKSPACE_ENV, Workspace
from prisma_core.store.datasets import LARGE_DATASET_ENV, SHOWN_COLUMNS

PAGES = ["home", "datasets", "embeddings", "train", "features", "families", "labels", "explore", "glossary"]
EXPLORE_TABS = ["Refract", "Search", "Concept query", "Compare groups", "Over time", "Map", "Downloads"]


@pytest.fixture(scope="module")
def large(small_run: SmallRun, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Workspace, str, str]]:
    """A copy of the small run, served as PRISMA_WORKSPACE with the large-dataset threshold at 10 documents."""
    path = tmp_path_factory.mktemp("large_app") / "workspace"
    workspace = small_run.copy(path)
    with pytest.MonkeyPatch.context() as environment:
        environment.setenv(WORKSPACE_ENV, str(path))
        environment.setenv(LARGE_DATASET_ENV, "10")
        yield workspace, small_run.dataset_id, small_run.run.run_id


@pytest.fixture(scope="module")
def every_document(large) -> pd.DataFrame:
    workspace, dataset_id, _ = large
    return workspace.documents(dataset_id, SHOWN_COLUMNS)


@pytest.fixture(scope="module")
def run(large):
    workspace, _, run_id = large
    return pipeline.load_run(workspace, run_id)


def explore(large, tab: str):
    _, dataset_id, run_id = large
    at = new_app(dataset_id, run_id)
    at.session_state["explore_tab"] = tab
    return open_page(at, "explore")


def test_every_page_and_explore_tab_opens(large) -> None:
    _, dataset_id, run_id = large
    at = new_app(dataset_id, run_id)
    for page in PAGES:
        open_page(at, page)
        assert not at.exception, (page, at.exception)
    for tab in EXPLORE_TABS:
        at = explore(large, tab)
        assert not at.exception, (tab, at.exception)


def test_a_document_is_refracted_by_typing_its_id_not_picked_from_a_list(large, run, every_document) -> None:
    at = explore(large, "Refract")
    assert "refract_doc" not in [box.key for box in at.selectbox]  # no picker of every document
    assert "Type a document id to refract it." in texts(at.caption)
    at.text_input(key="refract_doc_id").input(every_document["doc_id"].iloc[17]).run()
    assert not at.exception
    shown = pd.concat(tables(at, "feature_id", "value", "label"))
    expected = refract_document(run, 17)
    assert shown["feature_id"].tolist() == expected["feature_id"].tolist()
    assert shown["value"].tolist() == pytest.approx(expected["value"].tolist())
    refracted_text(at, large[0], run, 17, every_document["text"].iloc[17])


def test_an_unknown_id_says_so_and_suggests_ids_that_start_alike(large, every_document) -> None:
    at = explore(large, "Refract")
    known = every_document["doc_id"].iloc[3]
    typed = known[:-1] + "#"  # no document has it; ids starting like it do exist
    at.text_input(key="refract_doc_id").input(typed).run()
    assert not at.exception
    (warning,) = texts(at.warning)
    assert warning.startswith(f"No document has the id “{typed}”.")
    starting = [doc_id for doc_id in every_document["doc_id"] if doc_id.startswith(typed[:-1] + "#")]
    assert all(doc_id in warning for doc_id in starting)
    assert not tables(at, "feature_id", "value", "label")


def test_search_in_lancedb_shows_what_the_in_memory_search_finds(large, run, every_document) -> None:
    workspace, dataset_id, _ = large
    query = "interest rates and the central bank"
    at = explore(large, "Search")
    at.text_input(key="search_query").input(query).run()
    assert not at.exception
    shown = table(at, "similarity", "doc_id")
    small = DatasetDocuments(workspace, dataset_id, len(every_document), every_document)
    vectors = DocumentVectors.from_vectors(workspace.vectors(dataset_id, run.record.embedding_key))
    expected = search_documents(run, query, small, vectors, 10)
    assert shown["doc_id"].tolist() == expected["doc_id"].tolist()
    assert shown["similarity"].tolist() == pytest.approx((1 - expected["distance"]).round(3).tolist(), abs=1e-3)
    at.selectbox(key="search_read").select(2).run()  # a result opens whole, read from the store
    assert expected["text"].iloc[2] in texts(at.get("text"))


def test_token_statistics_are_counted_on_a_sample_and_say_so(large, monkeypatch: pytest.MonkeyPatch) -> None:
    _, dataset_id, run_id = large
    monkeypatch.setattr("ui.loaders.TOKEN_SAMPLE", 20)
    at = open_page(new_app(dataset_id, run_id), "embeddings")
    at.toggle(key="count_tokens").set_value(True).run()
    assert not at.exception
    assert "Showing a random sample of 20 of 60 documents: the figures above are for that sample." in texts(at.caption)
    sample = DatasetDocuments.open(*large[:2]).sample(20)
    chunking = plan_chunks(load_model(EmbedConfig().model), sample["text"].tolist())
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Windows per document"] == f"{chunking.chunks_per_doc.mean():.2f}"
    assert metrics["Tokens per document"] == f"{int(np.median(chunking.tokens_per_doc)):,}"


def test_a_feature_card_reads_its_documents_by_position(large, run, every_document) -> None:
    _, dataset_id, run_id = large
    at = open_page(new_app(dataset_id, run_id), "features")
    assert not at.exception
    densest = int(run.features.sort_values("density", ascending=False)["feature_id"].iloc[0])
    strongest = run.codes[:, densest].toarray().ravel()
    top = np.argsort(-strongest, kind="stable")[: min(10, int((strongest > 0).sum()))]
    (shown,) = tables(at, "activation", "doc_id", "title", "text")
    assert shown["doc_id"].tolist() == every_document["doc_id"].iloc[top].tolist()
