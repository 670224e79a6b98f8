"""The labelling tests' run: one small real run is trained per session (the openings of 120 BBC articles, 64
features, k=4); each test works on its own copy of that workspace. One article carries a prompt-injection
attempt for the injection test; its capitals-only wording leaves the fake's derived labels (the commonest
capitalised word of the evidence) unchanged."""

import shutil
from collections.abc import Iterator

import pytest
from labelling_run import INJECTION, N_DOCUMENTS, WORDS_PER_DOCUMENT, BaseRun
from ollama_server import FakeOllama, running_fake_ollama

from prisma_core import pipeline
from prisma_core.ingest import IngestConfig
from prisma_core.sae import SAEConfig
from prisma_core.store import Workspace


@pytest.fixture(scope="session")
def base_run(tmp_path_factory, bbc) -> BaseRun:
    corpus = bbc.sample(N_DOCUMENTS, random_state=0).reset_index(drop=True)
    corpus["text"] = [" ".join(text.split()[:WORDS_PER_DOCUMENT]) for text in corpus["text"]]
    corpus.loc[0, "text"] = INJECTION + corpus.loc[0, "text"]
    folder = tmp_path_factory.mktemp("labelling")
    corpus.to_parquet(folder / "bbc120.parquet")
    workspace = Workspace(folder / "workspace")
    dataset_id, _ = pipeline.ingest(
        workspace, [folder / "bbc120.parquet"], "bbc120", IngestConfig(text_column="text", id_column="id")
    )
    pipeline.embed_dataset(workspace, dataset_id)
    summary = pipeline.train_run(workspace, dataset_id, SAEConfig(n_features=64, k=4))
    return BaseRun(workspace.path, summary.run_id, dataset_id, corpus)


@pytest.fixture
def workspace(base_run, tmp_path) -> Workspace:
    """A private copy of the trained workspace (the SAE weights stay in the session's original)."""
    shutil.copytree(base_run.path, tmp_path / "workspace")
    return Workspace(tmp_path / "workspace")


@pytest.fixture
def fake() -> Iterator[FakeOllama]:
    with running_fake_ollama() as server:
        yield server
