"""Training that cannot or must not save a run says why and saves nothing: too large for memory, a dataset
deleted meanwhile, no variance to explain, weights that diverge; corpora of near-identical texts (rounds 2
and 3).
"""

import dataclasses
import math
from pathlib import Path

import pandas as pd
import pytest
from reliability_helpers import BY_ID, SMALL_SAE, Trained, bbc_subset, cli_main, error_lines, write_parquet

from prisma_core import pipeline
from prisma_core.cli.output import print_trained
from prisma_core.embed import EmbedConfig, model_key
from prisma_core.errors import NotFoundError, TrainingError
from prisma_core.progress import Progress
from prisma_core.sae import SAEConfig, check_config
from prisma_core.sae.train import DIVERGED, quality_metrics, train_sae
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


# -- round 4: outcomes told truthfully --------------------------------------------------------------------------------


def test_a_training_during_which_documents_were_added_is_saved_and_said_so(
    workspace: Workspace, small_run, bbc: pd.DataFrame, tmp_path: Path, capsys
) -> None:
    more = write_parquet(bbc_subset(bbc, 3, skip=20), tmp_path / "more.parquet")
    added = []

    def add_during_training(event: Progress) -> None:
        if event.stage == "train_sae" and not added:  # another session's `add`, while this SAE trains
            added.append(pipeline.add_documents(workspace, small_run.dataset_id, [more]).n_added)

    summary = pipeline.train_run(workspace, small_run.dataset_id, SMALL_SAE, progress=add_during_training)
    print_trained(workspace, summary)  # what `train` prints once it has saved the run

    assert added == [15] and workspace.run(summary.run_id).metrics["n_documents"] == 60
    printed = capsys.readouterr().out
    assert f"run {summary.run_id}: held-out FVU" in printed
    assert printed.rstrip().endswith(
        "15 documents were added to the dataset while this run trained on its first 60: `python -m prisma_core "
        "place` places them in it, without training again"
    )
    assert cli_main("place", workspace=workspace) == 0
    assert pipeline.load_run(workspace, summary.run_id).codes.shape[0] == 75


def test_edits_are_never_carried_from_a_run_to_itself(workspace: Workspace, capsys) -> None:
    run_id = workspace.run_or_latest().run_id
    assert (
        cli_main("edit", "--action", "rename", "--level", "theme", "--id", "0", "--name", "Mine", workspace=workspace)
        == 0
    )
    before = workspace.edits.of(run_id)
    assert cli_main("carry", "--run", run_id, "--from-run", run_id, workspace=workspace) == 2
    (message,) = error_lines(capsys.readouterr().err)
    assert message == f"error: Run {run_id}'s edits are its own already: name an earlier run to carry edits from."
    assert workspace.edits.of(run_id) == before
