"""Workspaces on object storage, against a real S3-compatible server on loopback (SeaweedFS, tests/helpers/s3_server.py)
and the real bundled model: the CLI's whole pipeline, the app's storage options, two writers at once, a killed writer,
and the one message a misconfigured object store gives."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.fs as pafs
import pytest
from reliability_helpers import REPO, SMALL_SAE, add_during_an_addition, bbc_subset, sae_flags, write_parquet
from s3_server import S3Server, seaweed_s3
from start_line import start_line

from prisma_core import cli, pipeline
from prisma_core.embed import EmbedConfig, model_key
from prisma_core.errors import StoreError
from prisma_core.ingest import IngestConfig
from prisma_core.pipeline import EXPORT_FILES
from prisma_core.reading.explore import refract_text
from prisma_core.store import WORKSPACE_ENV, Workspace
from prisma_core.store.datasets import BUSY_ADDING
from prisma_core.store.location import Location, S3Settings

pytestmark = pytest.mark.slow  # starts a server and embeds with the real model: the full suite, not the fast tier

BY_ID = ["--text-column", "text", "--id-column", "id"]


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with seaweed_s3(tmp_path_factory.mktemp("seaweed")) as server:
        yield server


@pytest.fixture(scope="module")
def s3_env(s3: S3Server) -> Iterator[S3Server]:
    """The server's keys and address in the environment, as a user of the command line sets them."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in s3.env.items():
            patch.setenv(name, value)
        yield s3


@dataclass(frozen=True)
class Built:
    uri: str
    dataset_id: str
    run_id: str
    documents: pd.DataFrame
    codes: np.ndarray


def objects(server: S3Server, prefix: str) -> set[str]:
    """Every object under a prefix of the bucket, relative to it."""
    infos = server.filesystem().get_file_info(pafs.FileSelector(f"{server.bucket}/{prefix}", recursive=True))
    root = f"{server.bucket}/{prefix}/"
    return {info.path.removeprefix(root) for info in infos if info.type == pafs.FileType.File}


def run_folders(server: S3Server, prefix: str) -> set[str]:
    infos = server.filesystem().get_file_info(pafs.FileSelector(f"{server.bucket}/{prefix}/runs", allow_not_found=True))
    return {info.base_name for info in infos if info.type == pafs.FileType.Directory}


@pytest.fixture(scope="module")
def built(s3_env: S3Server, tmp_path_factory: pytest.TempPathFactory, bbc: pd.DataFrame) -> Built:
    """40 BBC articles ingested, embedded and trained (tiny SAE) through the CLI on s3://prisma/pipeline."""
    uri = f"s3://{s3_env.bucket}/pipeline"
    source = write_parquet(bbc_subset(bbc, 8), tmp_path_factory.mktemp("bbc") / "bbc.parquet")
    assert cli.main(["ingest", str(source), "--name", "bbc", *BY_ID, "--workspace", uri]) == 0
    assert cli.main(["embed", "--workspace", uri]) == 0
    assert cli.main(["train", *sae_flags(), "--workspace", uri]) == 0
    workspace = Workspace(uri)
    (dataset,) = workspace.datasets()
    (run,) = workspace.runs()
    loaded = pipeline.load_run(workspace, run.run_id)
    return Built(uri, dataset.dataset_id, run.run_id, workspace.documents(dataset.dataset_id), loaded.codes.toarray())


def test_the_pipeline_stores_tables_and_weights_in_the_bucket_and_nothing_locally(built: Built, s3: S3Server) -> None:
    workspace = Workspace(built.uri)
    assert workspace.dataset(built.dataset_id).n_documents == 40 and len(built.documents) == 40
    assert workspace.vectors(built.dataset_id, model_key(EmbedConfig())).shape == (40, 384)
    run = workspace.run(built.run_id)
    assert run.weights_dir == f"{built.uri}/runs/{built.run_id}"
    n_kept = len(workspace.feature_stats.of(built.run_id))
    assert 0 < n_kept <= SMALL_SAE.n_features and built.codes.shape == (40, n_kept)
    assert ((built.codes > 0).sum(axis=1) <= SMALL_SAE.k).all() and (built.codes > 0).any(axis=1).all()
    stored = objects(s3, "pipeline")
    run_files = {f"runs/{built.run_id}/{name}" for name in ("sae.safetensors", "config.json", "owner.json")}
    assert run_files <= stored
    tables = {path.split("/")[1] for path in stored if path.startswith("lancedb/")}
    assert {"datasets.lance", "documents.lance", "sae_runs.lance", "activations.lance", "features.lance"} <= tables
    assert not (workspace.path / "lancedb").exists() and not (workspace.path / "runs").exists()


def test_list_and_export_read_the_workspace_from_the_environment(
    built: Built, s3: S3Server, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WORKSPACE_ENV, built.uri)
    assert cli.main(["list"]) == 0
    listed = capsys.readouterr().out
    assert built.dataset_id in listed and built.run_id in listed
    n_kept = len(Workspace(built.uri).feature_stats.of(built.run_id))
    assert f"n={n_kept} k={SMALL_SAE.k}" in listed
    assert cli.main(["export", "--out", str(tmp_path / "export")]) == 0
    exported = tmp_path / "export"
    assert all((exported / name).is_file() for name in EXPORT_FILES)
    weights = s3.filesystem().open_input_stream(f"{s3.bucket}/pipeline/runs/{built.run_id}/sae.safetensors").read()
    assert (exported / "sae.safetensors").read_bytes() == weights
    assert len(pd.read_parquet(exported / "features.parquet")) == n_kept
    assert pd.read_parquet(exported / "documents.parquet")["doc_id"].tolist() == built.documents["doc_id"].tolist()
    assert json.loads((exported / "config.json").read_text())["run_id"] == built.run_id


def test_storage_options_alone_open_the_workspace(built: Built, s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """The app passes its [s3] secrets as storage options: they reach the tables and the weights without any
    AWS_* variable, and they win over the environment's."""
    for name in s3.env:
        monkeypatch.setenv(name, "not-these")
    workspace = Workspace(built.uri, storage_options=s3.storage_options)
    loaded = pipeline.load_run(workspace, built.run_id)
    np.testing.assert_array_equal(loaded.codes.toarray(), built.codes)
    assert str(loaded.weights) == f"{built.uri}/runs/{built.run_id}" and (loaded.weights / "config.json").is_file()


def test_the_app_opens_the_workspace_with_the_keys_of_its_secrets(
    built: Built, s3: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PRISMA_WORKSPACE names the bucket workspace, the [s3] secrets hold the keys (the environment's are wrong):
    the Explore page refracts typed text with the run's weights read from the bucket."""
    from streamlit.testing.v1 import AppTest

    from ui.state import PENDING_SELECTION_KEY

    monkeypatch.setenv(WORKSPACE_ENV, built.uri)
    for name in s3.env:
        monkeypatch.setenv(name, "not-these")
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
    at.secrets["s3"] = s3.storage_options
    at.session_state[PENDING_SELECTION_KEY] = (built.dataset_id, built.run_id)
    at.session_state["explore_tab"] = "Refract"
    at.run()
    at.switch_page("pages/explore.py").run()
    text = "The striker scored twice as the club won the league title."
    at.radio(key="refract_mode").set_value("Your own text").run()
    at.text_area(key="refract_text").input(text)
    at.button(key="refract_button").click().run()
    assert not at.exception and not at.error
    shown = pd.concat([frame.value for frame in at.dataframe if {"feature_id", "value"} <= set(frame.value.columns)])
    run = pipeline.load_run(Workspace(built.uri, storage_options=s3.storage_options), built.run_id)
    assert shown["feature_id"].tolist() == refract_text(run, text)["feature_id"].tolist()


def test_settings_come_from_storage_options_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "from-env")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-from-env")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    monkeypatch.delenv("AWS_REGION", raising=False)
    settings = S3Settings.resolve({"AWS_ACCESS_KEY_ID": "from-secrets", "region": "eu-west-1"})
    assert (settings.access_key_id, settings.secret_access_key) == ("from-secrets", "secret-from-env")
    assert settings.lance_options() == {
        "aws_access_key_id": "from-secrets",
        "aws_secret_access_key": "secret-from-env",
        "aws_endpoint": "http://127.0.0.1:9000",
        "aws_region": "eu-west-1",
        "allow_http": "true",
        "connect_timeout": "10s",
    }
    with pytest.raises(StoreError, match="plain http"):
        S3Settings.resolve({"endpoint": "http://storage.example.org:9000"})
    assert S3Settings.resolve({"endpoint": "http://storage.example.org:9000", "allow_http": "true"}).plain_http
    monkeypatch.setenv("ENDPOINT", "http://unrelated.example.org")  # only AWS_* variables are read
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    assert S3Settings.resolve().endpoint is None
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(StoreError, match="keys are incomplete: AWS_SECRET_ACCESS_KEY is not set"):
        S3Settings.resolve()
    with pytest.raises(StoreError, match="neither a local folder nor an s3:// address"):
        Location.of("gs://bucket/prisma")


@pytest.mark.parametrize(
    ("where", "options", "expected"),
    [
        ("s3://prisma/x", {"aws_secret_access_key": "wrong"}, "could not be reached or refused the keys"),
        ("s3://no-such-bucket/x", {}, "there is no bucket 'no-such-bucket'; create it first"),
        ("s3://prisma/x", {"aws_endpoint": "http://127.0.0.1:1"}, "could not be reached or refused the keys"),
        ("s3://prisma/x", {"aws_endpoint": "http://storage.example.org:9000"}, "plain http"),
        ("s3://", {}, "names no bucket"),
    ],
)
def test_a_misconfigured_object_store_gives_one_clear_message(
    s3_env: S3Server, where: str, options: dict[str, str], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(StoreError, match=expected):
        Workspace(where, storage_options=options)
    for name, value in options.items():
        monkeypatch.setenv(name.upper().replace("AWS_ENDPOINT", "AWS_ENDPOINT_URL"), value)
    result = subprocess.run(
        [sys.executable, "-m", "prisma_core", "list", "--workspace", where],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    (message,) = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert expected in message


def start_cli_worker(uri: str, commands: list[list[str]], start: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            str(REPO / "tests" / "helpers" / "reliability_cli_worker.py"),
            uri,
            start,
            json.dumps(commands),
        ],
        cwd=REPO,
        env=os.environ | {"PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_writers_at_once_lose_nothing(s3_env: S3Server, tmp_path: Path, bbc: pd.DataFrame) -> None:
    """Two processes ingest, embed and train their own dataset in one bucket workspace at the same moment."""
    uri = f"s3://{s3_env.bucket}/two-writers"
    start = start_line(tmp_path / "start", 2)  # both start writing after their imports, at the same moment
    workers = {}
    for number, name in enumerate(("alice", "bob")):
        own = write_parquet(bbc_subset(bbc, 5, skip=8 + 5 * number), tmp_path / f"{name}.parquet")
        extra = write_parquet(bbc_subset(bbc, 2, skip=20 + 2 * number), tmp_path / f"{name}-extra.parquet")
        commands = [
            ["run", str(own), "--name", name, *BY_ID, *sae_flags()],
            ["ingest", str(extra), "--name", f"{name} extra", *BY_ID],
        ]
        workers[name] = start_cli_worker(uri, commands, start)
    for name, worker in workers.items():
        stdout, stderr = worker.communicate(timeout=900)
        assert worker.returncode == 0, f"{name}: {stderr[-3000:]}"
        assert "conflict" not in (stdout + stderr).lower()

    workspace = Workspace(uri)
    datasets = {dataset.name: dataset for dataset in workspace.datasets()}
    assert sorted(datasets) == ["alice", "alice extra", "bob", "bob extra"]
    for name in ("alice", "bob"):
        dataset = datasets[name]
        assert dataset.n_documents == 25 and len(workspace.documents(dataset.dataset_id)) == 25
        assert len(workspace.documents(datasets[f"{name} extra"].dataset_id)) == 10
        (run,) = workspace.runs(dataset.dataset_id)
        loaded = pipeline.load_run(workspace, run.run_id)
        assert loaded.codes.shape == (25, len(loaded.features)) and len(loaded.features) <= SMALL_SAE.n_features
        assert (loaded.codes.getnnz(axis=1) <= SMALL_SAE.k).all() and loaded.codes.nnz > 0
        assert loaded.features["label"].notna().all()
    assert run_folders(s3_env, "two-writers") == {run.run_id for run in workspace.runs()}


def test_a_killed_writer_leaves_the_workspace_readable_and_its_run_is_cleaned_up(
    built: Built, s3_env: S3Server
) -> None:
    """SIGKILL a training once its weights are in the bucket (its record is not): earlier work reads back as it
    was, the half-run is not listed, and the next run removes its folder."""
    writer = subprocess.Popen(
        [sys.executable, "-m", "prisma_core", "train", *sae_flags(), "--workspace", built.uri],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    weights = Location.of(f"{built.uri}/runs")
    killed = None
    deadline = time.monotonic() + 600
    while killed is None and writer.poll() is None and time.monotonic() < deadline:
        new = [folder for folder in weights.folders() if folder.name != built.run_id]
        if new and (new[0] / "sae.safetensors").is_file():
            writer.send_signal(signal.SIGKILL)
            killed = new[0].name
        time.sleep(0.05)
    assert writer.wait(timeout=60) == -signal.SIGKILL, "the training ended before it could be killed"

    workspace = Workspace(built.uri)
    assert [run.run_id for run in workspace.runs()] == [built.run_id]
    pd.testing.assert_frame_equal(workspace.documents(built.dataset_id), built.documents)
    np.testing.assert_array_equal(pipeline.load_run(workspace, built.run_id).codes.toarray(), built.codes)
    assert run_folders(s3_env, "pipeline") == {built.run_id, killed}
    run_id, _ = workspace.new_run_dir()  # starting a run removes what the killed one left
    assert run_folders(s3_env, "pipeline") == {built.run_id, run_id}
    workspace.delete_run(run_id)
    assert run_folders(s3_env, "pipeline") == {built.run_id}


def test_an_addition_started_while_another_embeds_and_places_stores_nothing(
    s3_env: S3Server, tmp_path: Path, bbc: pd.DataFrame
) -> None:
    """The claim on a dataset is one compare-and-swap on its row, as atomic in a bucket as on a local disk."""
    uri = f"s3://{s3_env.bucket}/adding"
    source = write_parquet(bbc_subset(bbc, 6), tmp_path / "bbc.parquet")
    chained = pipeline.ingest_embed_train(
        Workspace(uri),
        pipeline.NewDataset([source], "bbc", IngestConfig(text_column="text", id_column="id")),
        sae_config=SMALL_SAE,
    )
    files = [write_parquet(bbc_subset(bbc, 2, skip=20 + 2 * n), tmp_path / f"more{n}.parquet") for n in (0, 1)]
    first, second = add_during_an_addition(uri, chained.dataset_id, *files, tmp_path)

    assert first[0] == 0 and "added 10 documents: the dataset has 40" in first[1], first[2][-2000:]
    assert second[0] == 2 and f"error: {BUSY_ADDING}" in second[2], second[2][-2000:]
    workspace = Workspace(uri)
    assert workspace.documents(chained.dataset_id)["position"].tolist() == list(range(40))
    assert workspace.db.open_table("documents").count_rows() == 40
    assert pipeline.load_run(workspace, chained.run_id).codes.shape[0] == 40


def test_a_repair_in_a_bucket_removes_only_the_damaged_file(s3_env: S3Server, ag_news: pd.DataFrame, capsys) -> None:
    uri = f"s3://{s3_env.bucket}/repair"
    workspace, fs = Workspace(uri), s3_env.filesystem()
    data = f"{s3_env.bucket}/repair/lancedb/documents.lance/data"
    dataset_ids, written = [], []
    for number in range(3):
        before = objects(s3_env, "repair/lancedb/documents.lance/data") if number else set()
        part = ag_news.iloc[20 * number : 20 * (number + 1)]
        upload = [(f"part{number}.csv", part.to_csv(index=False).encode())]
        dataset_ids.append(
            pipeline.ingest(workspace, upload, config=IngestConfig(text_column="text", id_column="id"))[0]
        )
        written.append(objects(s3_env, "repair/lancedb/documents.lance/data") - before)
    (middle,) = written[1]
    content = fs.open_input_stream(f"{data}/{middle}").read()
    with fs.open_output_stream(f"{data}/{middle}") as cut:  # the middle dataset's file, cut in half
        cut.write(content[: len(content) // 2])

    assert cli.main(["repair", "--workspace", uri]) == 0
    repaired = capsys.readouterr().out.splitlines()
    assert repaired[0].endswith("removed the 20 rows of its 1 damaged data file(s) and kept its 40 intact rows")
    assert repaired[1].startswith(f"dataset {dataset_ids[1]}: 0 of its 20 documents are left")
    workspace = Workspace(uri)
    for dataset_id, number in ((dataset_ids[0], 0), (dataset_ids[2], 2)):
        assert (
            workspace.documents(dataset_id)["text"].tolist()
            == ag_news["text"].iloc[20 * number : 20 * (number + 1)].tolist()
        )
    assert cli.main(["delete", "--dataset", dataset_ids[1], "--workspace", uri]) == 0
    assert cli.main(["repair", "--workspace", uri]) == 0
    assert capsys.readouterr().out.endswith("every table reads in full and every run is listed: nothing to repair\n")
