"""Adding documents to a dataset that has a trained run, in the app: the upload on the Datasets page places them in
the run and says whether to train again; a run that lacks added documents says so and places them."""

from __future__ import annotations

import pandas as pd
import pytest
from app_helpers import new_app, open_page, texts, wait_for_job

from prisma_core import pipeline
from prisma_core.ingest import IngestConfig
from prisma_core.reading.runs import load_run
from prisma_core.sae import SAEConfig
from prisma_core.store import Workspace

pytest_plugins = ["app_fixtures"]
PER_CATEGORY = 8


@pytest.fixture
def small_dataset(app_workspace, bbc: pd.DataFrame, tmp_path) -> tuple[Workspace, str, str]:
    """40 BBC articles (8 per category) ingested, embedded and trained through the core, in the app's workspace."""
    path = tmp_path / "bbc40.parquet"
    bbc.groupby("label").head(PER_CATEGORY).to_parquet(path)
    workspace = Workspace(app_workspace)
    name = f"BBC to grow ({tmp_path.name})"  # each test's own: the sidebar picks datasets by name
    dataset_id, _ = pipeline.ingest(workspace, [path], name, IngestConfig(id_column="id"))
    pipeline.embed_dataset(workspace, dataset_id)
    run = pipeline.train_run(workspace, dataset_id, SAEConfig(n_features=32, k=4, epochs=3, batch_size=32))
    return workspace, dataset_id, run.run_id


def _more(bbc: pd.DataFrame) -> pd.DataFrame:
    """10 articles the dataset lacks (2 per category) and 1 it holds."""
    unseen = bbc.groupby("label").nth([PER_CATEGORY, PER_CATEGORY + 1])
    return pd.concat([unseen, bbc.groupby("label").head(1).head(1)])


def test_uploaded_documents_are_placed_in_the_run_with_a_verdict(small_dataset, bbc: pd.DataFrame):
    workspace, dataset_id, run_id = small_dataset
    at = new_app(dataset_id, run_id)
    open_page(at, "datasets")
    assert not at.exception
    assert any("Add documents to “BBC to grow (" in text and "” (now 40)" in text for text in texts(at.markdown))
    csv = _more(bbc).to_csv(index=False).encode()
    at.file_uploader(key=f"add_upload_{dataset_id}").set_value(("more.csv", csv, "text/csv")).run()
    at.button(key="add_documents").click().run()
    assert not at.exception, at.exception
    wait_for_job(f"grow:{dataset_id}")
    at.run()
    assert not at.exception, at.exception
    assert texts(at.success) == [
        "Added 10 documents: the dataset now holds 50. Skipped 1 whose text the dataset holds already."
    ]
    verdicts = texts(at.info) + texts(at.warning)
    assert any(v.startswith("**Model trained") and "The 10 new documents" in v for v in verdicts), verdicts
    run = load_run(Workspace(workspace.uri), run_id)
    assert run.codes.shape[0] == 50
    open_page(at, "home")
    assert (
        "10 documents were added to the dataset after this model was trained, and placed in it without a new training."
        in texts(at.caption)
    )
    for page in ("features", "families", "explore", "labels"):  # the run opens with its new documents everywhere
        open_page(at, page)
        assert not at.exception, (page, at.exception)
        assert not [w for w in texts(at.warning) if "not placed" in w], page


def test_a_run_missing_added_documents_says_so_and_places_them(small_dataset, bbc: pd.DataFrame, tmp_path):
    workspace, dataset_id, run_id = small_dataset
    path = tmp_path / "more.parquet"
    _more(bbc).to_parquet(path)
    pipeline.add_documents(workspace, dataset_id, [path])  # as from another session: not placed yet
    at = new_app(dataset_id, run_id)
    open_page(at, "features")
    assert not at.exception, at.exception
    (warning,) = [w for w in texts(at.warning) if "not placed" in w]
    assert "knows the first 40 of the dataset's 50 documents: the 10 added since are not placed in it yet" in warning
    at.button(key="place_documents").click().run()
    wait_for_job(f"grow:{dataset_id}")
    at.run()
    assert not at.exception, at.exception
    assert not [w for w in texts(at.warning) if "not placed" in w]
    assert load_run(workspace, run_id).codes.shape[0] == 50
