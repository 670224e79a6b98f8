"""Training that cannot or must not save a run says why and saves nothing: too large for memory, a dataset
deleted meanwhile, no variance to explain, weights that diverge; corpora of near-identical texts (rounds 2
and 3).
"""

import dataclasses
import math
from pathlib import Path

import pandas as pd
import pytest
from reliability_helpers import BY_ID, SMALL_SAE, Trained, bbc_subset

from prisma_core import pipeline
from prisma_core.embed import EmbedConfig, model_key
from prisma_core.errors import NotFoundError, TrainingError
from prisma_core.progress import Progress
from prisma_core.sae import SAEConfig, check_config, train_sae
from prisma_core.sae.train import DIVERGED, quality_metrics
from prisma_core.store import Workspace

KEY = model_key(EmbedConfig())


def test_training_that_cannot_fit_in_memory_is_refused_before_allocating() -> None:
    with pytest.raises(TrainingError, match=r"needs about [\d.]+ GB of memory; [\d.]+ GB are free"):
        check_config(SAEConfig(n_features=98_304), 10_000, 100_000)


def test_dataset_deleted_while_it_trains_gives_a_message_and_no_run(trained: Trained, bbc: pd.DataFrame) -> None:
    workspace = Workspace(trained.path)
    upload = [("other.csv", bbc_subset(bbc, 12, skip=12).to_csv(index=False).encode())]
    dataset_id, _ = pipeline.ingest(workspace, upload, config=BY_ID)
    pipeline.embed_dataset(workspace, dataset_id)
    runs_before = sorted(path.name for path in (trained.path / "runs").iterdir())

    deleted = []

    def delete_during_training(event: Progress) -> None:
        if event.stage == "train_sae" and not deleted:
            workspace.delete_dataset(dataset_id)  # as another session would, from the Datasets page
            deleted.append(dataset_id)

    with pytest.raises(NotFoundError, match="deleted while its SAE was training"):
        pipeline.train_run(workspace, dataset_id, SMALL_SAE, progress=delete_during_training)
    assert [run.run_id for run in workspace.runs(dataset_id)] == []
    assert sorted(path.name for path in (trained.path / "runs").iterdir()) == runs_before


# -- held-out FVU with no variance to explain -------------------------------------------------------------------------


def test_identical_documents_are_refused_with_no_variance_to_explain(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "workspace")
    upload = [("same.csv", ("text\n" + "the same note about chest pain\n" * 60).encode())]
    dataset_id, _ = pipeline.ingest(workspace, upload)
    pipeline.embed_dataset(workspace, dataset_id)
    with pytest.raises(TrainingError, match="no variance to explain"):
        pipeline.train_run(workspace, dataset_id, SMALL_SAE)
    assert workspace.runs() == []


def test_a_held_out_set_with_no_variance_reports_no_fvu(trained: Trained) -> None:
    vectors = Workspace(trained.path).vectors(trained.dataset_id, KEY)
    metrics = train_sae(vectors, SAEConfig(n_features=64, k=4, epochs=2, holdout_fraction=0.01)).metrics
    assert metrics["n_holdout"] == 1
    assert math.isnan(metrics["fvu_holdout"]) and math.isnan(metrics["variance_explained_holdout"])
    assert metrics["fvu_holdout_note"] == "the held-out documents do not vary: no variance to explain"


def test_training_that_diverges_saves_no_run() -> None:
    with pytest.raises(TrainingError, match="Training diverged"):
        quality_metrics(float("nan"), float("nan"), [True], 1, 1, 0)
    assert "nothing was saved" in DIVERGED


def test_a_corpus_of_one_repeated_text_and_one_other_gets_two_themes_without_warnings(
    tmp_path: Path, bbc: pd.DataFrame, recwarn
) -> None:
    texts = [bbc["text"].iloc[0]] * 59 + [bbc["text"].iloc[1]]
    workspace = Workspace(tmp_path / "workspace")
    dataset_id, _ = pipeline.ingest(workspace, [("same.csv", pd.DataFrame({"text": texts}).to_csv().encode())])
    pipeline.embed_dataset(workspace, dataset_id)
    summary = pipeline.train_run(workspace, dataset_id, dataclasses.replace(SMALL_SAE, holdout_fraction=0.0))
    assert summary.n_themes == 2 and summary.metrics["features_kept"] >= SMALL_SAE.k  # both texts' directions
    assert [str(warning.message) for warning in recwarn] == []
