"""Shared by the AppTest modules (`pytest_plugins = ["app_fixtures"]`): one workspace per test session, built
through the app itself.

`trained_app` uploads 150 real BBC articles through the Datasets page's file uploader, picks the columns, embeds on
the Embeddings page and trains a small SAE on the Train page, then hands the workspace to every page test.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from app_helpers import SMALL_SAE, bbc_csv, new_app, open_page, wait_for_job

from prisma_core import pipeline
from prisma_core.embed import EmbedConfig, model_key
from prisma_core.store import WORKSPACE_ENV, Workspace


@pytest.fixture(scope="session")
def app_workspace(tmp_path_factory: pytest.TempPathFactory, corpora_dir: Path) -> Iterator[Path]:
    """The app's workspace for this session (PRISMA_WORKSPACE), and the demo corpus read from the shared copy."""
    path = tmp_path_factory.mktemp("app_workspace")
    with pytest.MonkeyPatch.context() as environment:  # the variables are restored however the session ends
        environment.setenv(WORKSPACE_ENV, str(path))
        environment.setenv("PRISMA_DEMO_FILE", str(corpora_dir / "mtsamples.parquet"))
        environment.setenv("PRISMA_DEMO_DOCS", "60")
        yield path


@dataclass(frozen=True)
class TrainedApp:
    workspace: Workspace
    dataset_id: str
    run_id: str
    frame: pd.DataFrame  # the uploaded rows, in file order


@pytest.fixture(scope="session")
def trained_app(app_workspace: Path, corpora_dir: Path) -> TrainedApp:
    frame, csv = bbc_csv(corpora_dir)
    at = new_app()
    open_page(at, "datasets")
    at.file_uploader(key="upload").set_value(("bbc_sample.csv", csv, "text/csv")).run()
    at.selectbox(key="text_column").select("text")
    at.selectbox(key="title_column").select("title")
    at.selectbox(key="id_column").select("id")
    at.text_input(key="dataset_name").input("BBC sample")
    at.button(key="create_dataset").click().run()
    assert not at.exception, at.exception
    workspace = Workspace(app_workspace)
    (dataset,) = [d for d in workspace.datasets() if d.name == "BBC sample"]

    open_page(at, "embeddings")
    at.button(key="embed_button").click().run()
    space = model_key(pipeline.dataset_config(workspace, dataset.dataset_id, EmbedConfig()))  # as the page named it
    wait_for_job(f"embed:{dataset.dataset_id}:{space}")

    open_page(at, "train")
    at.number_input(key="n_features").set_value(SMALL_SAE["n_features"])
    at.number_input(key="k").set_value(SMALL_SAE["k"])
    at.number_input(key="epochs").set_value(SMALL_SAE["epochs"])
    at.number_input(key="batch_size").set_value(SMALL_SAE["batch_size"])
    at.button(key="FormSubmitter:train_form-Train").click().run()
    assert not at.exception, at.exception
    wait_for_job(f"train:{dataset.dataset_id}")
    at.run()
    (run,) = workspace.runs(dataset.dataset_id)
    return TrainedApp(workspace, dataset.dataset_id, run.run_id, frame)
