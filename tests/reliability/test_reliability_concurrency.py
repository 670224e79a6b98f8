"""Concurrent use: several processes writing one workspace at the same moment, as two analysts on one instance.

Nothing may be lost or doubled, and no commit conflict may reach the user.
"""

import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from app_helpers import new_app, open_page, texts
from reliability_helpers import (
    BY_ID,
    REPO,
    SMALL_SAE,
    Trained,
    add_during_an_addition,
    bbc_subset,
    error_lines,
    sae_flags,
    two_family_settings,
    write_parquet,
)
from reliability_vector_writer import VECTOR_DIM, VECTOR_KEY
from start_line import start_line

from prisma_core import pipeline
from prisma_core.concepts.families import FamilyConfig, find_families
from prisma_core.embed import EmbedConfig, model_key
from prisma_core.pipeline.jobs import Job, JobRegistry
from prisma_core.store import WORKSPACE_ENV, NamedFamily, Workspace, vectors_table_name
from prisma_core.store.datasets import BUSY_ADDING
from ui.state import job_registry


def start_worker(script: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "helpers" / script), *args],
        cwd=REPO,
        env=os.environ | {"PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(worker: subprocess.Popen, timeout: float = 900) -> tuple[int, str, str]:
    stdout, stderr = worker.communicate(timeout=timeout)
    return worker.returncode, stdout, stderr


def test_two_processes_saving_the_same_vectors_keep_one_complete_copy(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "workspace")
    for number in range(12):
        contents = [f"document {row} of dataset {number}" for row in range(30)]
        documents = pd.DataFrame({"doc_id": [str(row) for row in range(30)], "title": None, "text": contents})
        workspace.add_dataset(f"set {number}", documents, ["set.csv"], {})
    start = start_line(tmp_path / "start", 2)
    writers = [start_worker("reliability_vector_writer.py", str(workspace.path), start, str(v)) for v in (1, 2)]

    seen_complete: set[str] = set()
    while any(writer.poll() is None for writer in writers):
        for dataset in workspace.datasets():
            if dataset.dataset_id in seen_complete or workspace.has_vectors(dataset.dataset_id, VECTOR_KEY):
                seen_complete.add(dataset.dataset_id)  # once complete, a dataset must stay readable
                assert workspace.vectors(dataset.dataset_id, VECTOR_KEY).shape == (30, VECTOR_DIM)
        time.sleep(0.05)

    for writer in writers:
        status, _, stderr = finish(writer)
        assert status == 0, stderr
    table = workspace.db.open_table(vectors_table_name(VECTOR_KEY))
    assert table.count_rows() == 12 * 30  # no second copies left
    for dataset in workspace.datasets():
        vectors = workspace.vectors(dataset.dataset_id, VECTOR_KEY)
        assert vectors.shape == (30, VECTOR_DIM)
        assert len(np.unique(vectors)) == 1  # all from one writer: never a mix of two copies


@pytest.fixture(scope="module")
def raced(tmp_path_factory: pytest.TempPathFactory, bbc: pd.DataFrame) -> tuple[Workspace, dict[str, int], list]:
    """Two sessions at once, each: embed and train the shared dataset, then ingest, embed and train its own."""
    root = tmp_path_factory.mktemp("raced")
    workspace = Workspace(root / "workspace")
    shared_id, _ = pipeline.ingest(
        workspace, [write_parquet(bbc_subset(bbc, 8), root / "shared.parquet")], config=BY_ID
    )
    start = start_line(root / "start", 2)
    workers = []
    for number, name in enumerate(("alice", "bob")):
        own = write_parquet(bbc_subset(bbc, 5, skip=8 + 5 * number), root / f"{name}.parquet")
        commands = [
            ["embed", "--dataset", shared_id],
            ["train", "--dataset", shared_id, *sae_flags()],
            ["run", str(own), "--name", name, "--text-column", "text", "--id-column", "id", *sae_flags()],
        ]
        workers.append(start_worker("reliability_cli_worker.py", str(workspace.path), start, json.dumps(commands)))
    results = [finish(worker) for worker in workers]
    return Workspace(workspace.path), {"shared": 40, "alice": 25, "bob": 25}, results


def test_both_sessions_finish_without_a_conflict_reaching_the_user(raced) -> None:
    _, _, results = raced
    for status, stdout, stderr in results:
        assert status == 0, stderr
        assert "conflict" not in (stdout + stderr).lower() and "Traceback" not in stderr
        assert stdout.count("run run-") == 2  # both trainings reported their run


def test_no_dataset_vector_or_run_is_lost_or_doubled(raced) -> None:
    workspace, sizes, _ = raced
    key = model_key(EmbedConfig())
    datasets = {dataset.name: dataset for dataset in workspace.datasets()}
    assert sorted(datasets) == ["alice", "bob", "shared"]
    vectors_table = workspace.db.open_table(vectors_table_name(key))
    # the shared dataset embedded by both: kept once (rows outside any dataset are cached label vectors)
    assert vectors_table.count_rows("dataset_id != ''") == 40 + 25 + 25
    assert vectors_table.count_rows("dataset_id = '' AND position != -1") == 0
    expected_runs = {"shared": 2, "alice": 1, "bob": 1}
    for name, dataset in datasets.items():
        assert dataset.n_documents == sizes[name]
        assert len(workspace.documents(dataset.dataset_id)) == sizes[name]
        assert workspace.vectors(dataset.dataset_id, key).shape == (sizes[name], 384)
        runs = workspace.runs(dataset.dataset_id)
        assert len(runs) == expected_runs[name]
        for run in runs:
            loaded = pipeline.load_run(workspace, run.run_id)
            kept = run.metrics["features_kept"]
            assert loaded.codes.shape == (sizes[name], kept) and kept <= SMALL_SAE.n_features
            assert (loaded.codes.getnnz(axis=1) <= SMALL_SAE.k).all() and loaded.codes.nnz > 0
            assert len(loaded.features) == kept and loaded.features["label"].notna().all()
            assert loaded.families == workspace.groups.families(run.run_id)
    run_ids = {run.run_id for run in workspace.runs()}
    assert {path.name for path in (workspace.path / "runs").iterdir()} == run_ids
    for table in ("activations", "features", "interpretations"):
        stored = workspace.db.open_table(table).search().select(["run_id"]).limit(None).to_pandas()["run_id"]
        assert set(stored) == run_ids


# -- a double click on "Train" starts one job -------------------------------------------------------------------

TRAIN_BUTTON = "FormSubmitter:train_form-Train"


def test_simultaneous_starts_of_one_job_run_it_once() -> None:
    """Eight sessions' clicks arrive in the same instant: one job runs, all of them get it."""
    registry = JobRegistry()
    release, running, ready = threading.Event(), threading.Event(), threading.Barrier(8)
    calls = []

    def work(progress) -> str:
        calls.append(threading.get_ident())
        running.set()
        release.wait(30)
        return "trained"

    def click() -> tuple[Job, bool]:
        ready.wait(30)
        return registry.start("train:ds-same", "Training", work)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: click(), range(8)))
        assert running.wait(30)  # the job runs while every click has been answered
        release.set()
    assert sum(started for _, started in results) == 1
    assert len({id(job) for job, _ in results}) == 1
    job = registry.wait("train:ds-same", 30)
    assert job.result == "trained" and len(calls) == 1


def test_train_clicked_in_two_sessions_at_once_trains_once(tmp_path, bbc, monkeypatch) -> None:
    monkeypatch.setenv(WORKSPACE_ENV, str(tmp_path / "workspace"))
    workspace = Workspace(tmp_path / "workspace")
    path = write_parquet(bbc_subset(bbc, 8), tmp_path / "bbc.parquet")
    dataset_id, _ = pipeline.ingest(workspace, [path], "shared", BY_ID)
    pipeline.embed_dataset(workspace, dataset_id)
    sessions = [open_page(new_app(dataset_id), "train") for _ in range(2)]
    for at in sessions:
        for key, value in {"n_features": 64, "k": 4, "epochs": 300, "batch_size": 32}.items():
            at.number_input(key=key).set_value(value)

    sessions[0].button(key=TRAIN_BUTTON).click().run()
    sessions[1].button(key=TRAIN_BUTTON).click().run()

    key = f"train:{dataset_id}"
    job = job_registry().get(key)
    assert job.running, "the second click came after the training had finished: make it longer"
    assert texts(sessions[1].info) == [
        "A training run on this dataset is already in progress: its progress is shown above."
    ]
    assert job_registry().wait(key, 600).error is None
    for at in sessions:
        at.run()
        assert not at.exception
    assert [run.run_id for run in workspace.runs(dataset_id)] == [job.result.run_id]


# -- two family rebuilds at once --------------------------------------------------------------------------------------


def members_of(families: list[NamedFamily]) -> list[list[int]]:
    return [family.members for family in sorted(families, key=lambda f: f.family_id)]


def test_concurrent_family_rebuilds_keep_exactly_one_complete_set(trained: Trained, tmp_path: Path) -> None:
    # two rebuilds with different results (on these 60 articles tau changes nothing: the forest's edges weigh 1)
    settings = two_family_settings(trained.codes)
    expected = {json.dumps(s): [f.members for f in find_families(trained.codes, FamilyConfig(**s))] for s in settings}
    assert len(set(map(len, expected.values()))) == 2
    workspace = Workspace(trained.path)
    allowed = [*expected.values(), members_of(workspace.groups.families(trained.run_id))]
    start = start_line(tmp_path / "start", 2)
    writer = str(REPO / "tests" / "helpers" / "reliability_family_writer.py")
    writers = [
        subprocess.Popen(
            [sys.executable, writer, str(trained.path), trained.run_id, start, config, "6"],
            cwd=REPO,
            env=os.environ | {"PYTHONPATH": str(REPO)},
            stderr=subprocess.PIPE,
            text=True,
        )
        for config in expected
    ]
    seen = 0
    while any(writer.poll() is None for writer in writers):  # a reader never sees a mix, or no families
        assert members_of(workspace.groups.families(trained.run_id)) in allowed
        seen += 1
    for writer in writers:
        assert writer.wait() == 0, writer.stderr.read()

    rows = workspace.db.open_table("families").search().where(f"run_id = '{trained.run_id}'").limit(None).to_pandas()
    assert rows["generation"].nunique() == 1
    assert rows["family_id"].is_unique
    assert members_of(workspace.groups.families(trained.run_id)) in expected.values()
    assert seen > 10


# -- round 4: two additions at once -----------------------------------------------------------------------------------


def test_an_addition_started_while_another_embeds_and_places_stores_nothing(
    workspace: Workspace, small_run, bbc: pd.DataFrame, tmp_path: Path
) -> None:
    files = [write_parquet(bbc_subset(bbc, 3, skip=20 + 3 * n), tmp_path / f"more{n}.parquet") for n in (0, 1)]
    first, second = add_during_an_addition(str(workspace.path), small_run.dataset_id, *files, tmp_path)

    assert first[0] == 0 and "added 15 documents: the dataset has 75" in first[1], first[2][-2000:]
    assert second[0] == 2 and "Traceback" not in second[2], second[2][-2000:]
    (message,) = error_lines(second[2])
    assert message == f"error: {BUSY_ADDING}"
    workspace = Workspace(workspace.path)
    assert workspace.dataset(small_run.dataset_id).n_documents == 75
    assert workspace.documents(small_run.dataset_id)["position"].tolist() == list(range(75))
    assert workspace.db.open_table("documents").count_rows() == 75  # no row of the refused addition
    assert pipeline.load_run(workspace).codes.shape[0] == 75  # and the first one's are placed
