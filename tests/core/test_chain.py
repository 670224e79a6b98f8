"""The ingest -> embed -> train chain (`pipeline.ingest_embed_train`) on the openings of 40 real BBC articles with a
tiny SAE."""

import dataclasses

import pandas as pd
from bbc_openings import openings

from prisma_core import pipeline
from prisma_core.embed import EmbedConfig, model_key
from prisma_core.ingest import IngestConfig
from prisma_core.progress import Progress
from prisma_core.run_shape.run_settings import run_settings
from prisma_core.sae import SAEConfig
from prisma_core.store import Workspace

TINY_SAE = SAEConfig(n_features=16, k=4, epochs=2, batch_size=16, n_trainings=1)
SIZE = ("n_features", "k", "epochs", "batch_size", "n_trainings")


def size(config: SAEConfig) -> dict[str, int]:
    """The settings a run is sized by (the record also resolves the automatic ones, e.g. the learning rate)."""
    return {name: getattr(config, name) for name in SIZE}


def test_the_chain_stores_a_dataset_its_vectors_and_a_run_on_them(bbc: pd.DataFrame, tmp_path) -> None:
    articles = openings(bbc.groupby("label").head(8))  # one model window each: the chain embeds them all the same
    articles.to_parquet(tmp_path / "bbc40.parquet")
    workspace = Workspace(tmp_path / "workspace")
    finished: list[object] = []

    documents = pipeline.NewDataset([tmp_path / "bbc40.parquet"], "bbc 40", IngestConfig(id_column="id"))
    chained = pipeline.ingest_embed_train(workspace, documents, sae_config=TINY_SAE, on_finished=finished.append)

    assert [dataset.dataset_id for dataset in workspace.datasets()] == [chained.dataset_id]
    assert workspace.dataset(chained.dataset_id).n_documents == chained.ingested.report.n_documents == 40
    assert finished == [chained.ingested, chained.embedded, chained.run]  # each stage announced as it ended
    assert (chained.embedded.n_documents, chained.embedded.n_computed) == (40, 40)
    assert workspace.vectors(chained.dataset_id, model_key(EmbedConfig())).shape == (40, 384)
    record = workspace.run(chained.run_id)
    assert (record.dataset_id, record.embedding_key) == (chained.dataset_id, chained.embedded.embedding_key)
    assert size(run_settings(record).sae) == size(TINY_SAE)
    assert len(workspace.feature_stats.of(chained.run_id)) == TINY_SAE.n_features


def test_the_chain_starts_from_a_stored_dataset_with_settings_made_from_the_suggested_ones(small_run, tmp_path) -> None:
    workspace = small_run.copy(tmp_path / "workspace")
    suggested = pipeline.suggested_sae_config(workspace, small_run.dataset_id)
    assert suggested.epochs != 1  # so the settings made from it differ

    chained = pipeline.ingest_embed_train(
        workspace, small_run.dataset_id, sae_config=lambda given: dataclasses.replace(given, epochs=1)
    )

    assert chained.ingested is None and len(workspace.datasets()) == 1  # no dataset ingested again
    assert (chained.embedded.n_cached, chained.embedded.n_computed) == (60, 0)  # every vector read back
    assert size(run_settings(workspace.run(chained.run_id)).sae) == size(dataclasses.replace(suggested, epochs=1))
    assert {run.run_id for run in workspace.runs(small_run.dataset_id)} == {small_run.run.run_id, chained.run_id}


def test_the_progress_says_embedding_while_the_model_loads_not_storing(bbc: pd.DataFrame, tmp_path, monkeypatch):
    """Issue 45: the demo showed "Storing the documents: 150 of 150" for a minute while the embedding model loaded.
    The embedding announces itself before the model is loaded."""
    import prisma_core.embed as embed_module

    events: list[Progress] = []
    seen_at_load: list[Progress] = []
    load = embed_module.load_embedder

    def loading(config):
        seen_at_load.append(events[-1])
        return load(config)

    monkeypatch.setattr(embed_module, "load_embedder", loading)
    articles = openings(bbc.head(6))
    articles.to_parquet(tmp_path / "six.parquet")
    workspace = Workspace(tmp_path / "workspace")
    dataset_id, _ = pipeline.ingest(workspace, [tmp_path / "six.parquet"], "six", IngestConfig(id_column="id"))
    pipeline.embed_dataset(workspace, dataset_id, progress=events.append)

    assert seen_at_load, "the model was loaded"
    last = seen_at_load[0]
    assert (last.stage, last.done, last.total) == ("embed", 0, 6) and "loading the embedding model" in last.message
