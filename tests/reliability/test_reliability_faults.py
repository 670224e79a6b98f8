"""Faults: processes killed mid-way, a disk that refuses writes, damaged weights, an Ollama that fails.

Every test ends by checking that what was stored before is intact and that the work can be done again cleanly.
"""

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from app_helpers import new_app, open_page, texts
from ollama_server import closed_port_url, running_fake_ollama
from reliability_helpers import (
    BY_ID,
    REPO,
    SMALL_SAE,
    Running,
    bbc_subset,
    cli_command,
    error_lines,
    run_cli_with_file_limit,
    sae_flags,
    snapshot,
    write_parquet,
)
from safetensors.torch import load_file, save_file

from prisma_core import pipeline
from prisma_core.embed import EmbedConfig, model_key
from prisma_core.errors import LabellingError, WeightsError
from prisma_core.interpret.ollama_config import OllamaConfig
from prisma_core.pipeline.labelling import LabelConfig, label_run, ollama_labeller
from prisma_core.sae.config import MAX_EPOCHS
from prisma_core.sae.io import WEIGHTS_FILE
from prisma_core.store import WORKSPACE_ENV, Workspace

KEY = model_key(EmbedConfig())
FILE_LIMIT_KB = 256
"""KB a process may write to any one file in the disk-failure tests (RLIMIT_FSIZE): LanceDB's data files and
the SAE weights are larger, its small manifests are not, like a disk filling up during the big write."""
WEIGHTS_LIMIT_KB = 32
"""Below the SAE's weights (SMALL_SAE: 2 x 32 features x 384 dimensions x 4 bytes, about 98 KB), which are written
before any table of the run."""


class Stored:
    """A workspace with dataset A (60 BBC articles) embedded and trained once, and dataset B only ingested."""

    def __init__(self, root: Path, bbc: pd.DataFrame) -> None:
        self.path = root / "workspace"
        workspace = Workspace(self.path)
        self.dataset_a, _ = pipeline.ingest(
            workspace, [write_parquet(bbc_subset(bbc, 12), root / "a.parquet")], config=BY_ID
        )
        self.dataset_b, _ = pipeline.ingest(
            workspace, [write_parquet(bbc_subset(bbc, 12, skip=12), root / "b.parquet")], config=BY_ID
        )
        pipeline.embed_dataset(workspace, self.dataset_a)
        self.run_a = pipeline.train_run(workspace, self.dataset_a, SMALL_SAE).run_id
        self.vectors_a = workspace.vectors(self.dataset_a, KEY)
        run_a = pipeline.load_run(workspace, self.run_a)
        self.codes_a, self.features_a = run_a.codes.toarray(), run_a.features
        self.documents = {d: workspace.documents(d) for d in (self.dataset_a, self.dataset_b)}

    def assert_earlier_work_intact(self, workspace: Workspace) -> None:
        assert {d.dataset_id for d in workspace.datasets()} >= {self.dataset_a, self.dataset_b}
        for dataset_id, documents in self.documents.items():
            pd.testing.assert_frame_equal(workspace.documents(dataset_id), documents)
        np.testing.assert_array_equal(workspace.vectors(self.dataset_a, KEY), self.vectors_a)
        run = pipeline.load_run(workspace, self.run_a)
        np.testing.assert_array_equal(run.codes.toarray(), self.codes_a)
        assert run.features["label"].notna().all()
        assert run.features["feature_id"].tolist() == self.features_a["feature_id"].tolist()


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory, bbc: pd.DataFrame) -> Stored:
    return Stored(tmp_path_factory.mktemp("faults"), bbc)


def rows_of_unlisted_runs(workspace: Workspace) -> dict[str, int]:
    """Rows in the run artefact tables that belong to no listed run: what a killed run could leave behind."""
    listed = {run.run_id for run in workspace.runs()}
    leftovers = {}
    for table in ("activations", "features", "interpretations", "families"):
        if table in workspace.db.list_tables().tables:
            run_ids = workspace.db.open_table(table).search().select(["run_id"]).limit(None).to_pandas()["run_id"]
            leftovers[table] = int((~run_ids.isin(listed)).sum())
    return leftovers


def run_folders(workspace: Workspace) -> list[str]:
    return sorted(path.name for path in (workspace.path / "runs").iterdir())


# -- killed processes -------------------------------------------------------------------------------------------


def test_killed_embedding_leaves_everything_stored_and_reruns_cleanly(stored: Stored) -> None:
    workspace = Workspace(stored.path)
    before = snapshot(workspace)
    embedding = Running("embed", "--dataset", stored.dataset_b, "--batch-size", "2", workspace=stored.path)
    embedding.wait_for(b"embed:")  # the first batch of chunks is encoded: the process is mid-way
    embedding.kill()

    reopened = Workspace(stored.path)
    # killed inside the first slice (vectors are stored every 2,048 documents): nothing is stored yet
    assert snapshot(reopened) == before
    assert not reopened.has_vectors(stored.dataset_b, KEY)
    stored.assert_earlier_work_intact(reopened)

    rerun = pipeline.embed_dataset(reopened, stored.dataset_b)
    assert (rerun.n_computed, rerun.n_cached) == (60, 0)
    assert reopened.vectors(stored.dataset_b, KEY).shape == (60, 384)
    stored.assert_earlier_work_intact(reopened)


@pytest.mark.parametrize(
    ("stage", "epochs", "leaves_rows"),
    [(b"train_sae:", MAX_EPOCHS, False), (b"label:", 3, True)],  # the most epochs: long enough to be killed
    ids=["while-training", "while-storing-features-and-labels"],
)
def test_killed_training_shows_no_half_run_and_a_rerun_completes(
    stored: Stored, stage: bytes, epochs: int, leaves_rows: bool
) -> None:
    workspace = Workspace(stored.path)
    runs_before = [run.run_id for run in workspace.runs(stored.dataset_a)]
    flags = sae_flags(replace(SMALL_SAE, epochs=epochs))
    training = Running("train", "--dataset", stored.dataset_a, *flags, workspace=stored.path)
    training.wait_for(stage)
    in_flight = set(run_folders(workspace)) - set(runs_before)
    assert len(in_flight) == 1  # the running process's folder, not yet a listed run
    assert set(run_folders(Workspace(stored.path))) >= in_flight  # opening the workspace leaves a live run alone
    training.kill()

    # What the killed process left (a folder, perhaps rows) is never listed and breaks nothing ...
    assert [run.run_id for run in workspace.runs(stored.dataset_a)] == runs_before
    assert (rows_of_unlisted_runs(workspace)["activations"] > 0) == leaves_rows
    stored.assert_earlier_work_intact(workspace)
    # ... opening the workspace again deletes nothing, and the next run started removes it.
    reopened = Workspace(stored.path)
    assert set(run_folders(reopened)) == set(runs_before) | in_flight
    rerun = pipeline.train_run(reopened, stored.dataset_a, SMALL_SAE)
    assert run_folders(reopened) == sorted([*runs_before, rerun.run_id])
    assert set(rows_of_unlisted_runs(reopened).values()) <= {0}
    stored.assert_earlier_work_intact(reopened)
    assert [run.run_id for run in reopened.runs(stored.dataset_a)] == [*runs_before, rerun.run_id]
    assert 0 < reopened.activations.batches(rerun.run_id)[0] <= 60 * SMALL_SAE.k
    reopened.delete_run(rerun.run_id)


# -- the disk refuses a write -----------------------------------------------------------------------------------


def test_failed_store_write_keeps_the_previous_version(stored: Stored, bbc: pd.DataFrame, tmp_path: Path) -> None:
    workspace = Workspace(stored.path)
    big = write_parquet(bbc_subset(bbc, 100, skip=24), tmp_path / "big.parquet")  # ~1 MB of text
    before = snapshot(workspace)
    versions_before = len(workspace.db.open_table("documents").list_versions())

    failed = run_cli_with_file_limit("ingest", str(big), "--name", "big", workspace=stored.path, limit_kb=FILE_LIMIT_KB)

    assert failed.returncode == 2, failed.stderr
    (message,) = error_lines(failed.stderr)
    assert message.startswith("error: Could not write to the workspace: File too large")
    assert "Traceback" not in failed.stderr
    reopened = Workspace(stored.path)
    assert snapshot(reopened) == before
    assert len(reopened.db.open_table("documents").list_versions()) == versions_before
    assert "big" not in {d.name for d in reopened.datasets()}
    stored.assert_earlier_work_intact(reopened)
    dataset_id, _ = pipeline.ingest(reopened, [big], "big", BY_ID)  # the same write works once there is room
    assert reopened.dataset(dataset_id).n_documents == 500
    reopened.delete_dataset(dataset_id)


def test_failed_weights_write_leaves_no_run(stored: Stored) -> None:
    workspace = Workspace(stored.path)
    before = snapshot(workspace, versions=False)  # the failed run's clean-up commits deletes (of nothing)

    failed = run_cli_with_file_limit(
        "train", "--dataset", stored.dataset_a, *sae_flags(), workspace=stored.path, limit_kb=WEIGHTS_LIMIT_KB
    )

    assert failed.returncode == 2, failed.stderr
    (message,) = error_lines(failed.stderr)
    assert message.startswith("error: Could not write the SAE to") and "File too large" in message
    assert "Traceback" not in failed.stderr
    reopened = Workspace(stored.path)
    assert snapshot(reopened, versions=False) == before
    stored.assert_earlier_work_intact(reopened)


# -- damaged or foreign weights ---------------------------------------------------------------------------------


class PickleBomb:
    """Unpickling this runs code: it would create the file named `marker`."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


DAMAGES = ["truncated", "random-bytes", "empty", "foreign-tensors", "wrong-shapes", "nan-weights", "pickle"]


def damage(weights: Path, how: str, marker: Path) -> None:
    original = weights.read_bytes()
    match how:
        case "truncated":
            weights.write_bytes(original[: len(original) // 2])
        case "random-bytes":
            weights.write_bytes(np.random.default_rng(0).bytes(len(original)))
        case "empty":
            weights.write_bytes(b"")
        case "foreign-tensors":
            save_file({"embeddings.weight": torch.zeros(10, 4), "lm_head.bias": torch.zeros(4)}, weights)
        case "wrong-shapes":
            tensors = {name: torch.zeros(2, 2) for name in ("W_enc", "W_dec", "b_enc", "b_pre")}
            save_file(tensors, weights)
        case "nan-weights":
            tensors = load_file(weights)
            first = next(iter(tensors))
            tensors[first] = torch.full_like(tensors[first], float("nan"))
            save_file(tensors, weights)
        case "pickle":
            torch.save({"W_enc": PickleBomb(marker)}, weights)


@pytest.mark.parametrize("how", DAMAGES)
def test_damaged_or_foreign_weights_are_refused_with_a_message(stored: Stored, tmp_path: Path, how: str) -> None:
    workspace = Workspace(stored.path)
    weights = Path(workspace.run(stored.run_a).weights_dir) / WEIGHTS_FILE
    original = weights.read_bytes()
    marker = tmp_path / "code-ran"
    try:
        damage(weights, how, marker)
        with pytest.raises(WeightsError) as refused:
            pipeline.load_run(workspace, stored.run_a)
        message = str(refused.value)
        assert str(weights) in message
        assert any(
            reason in message
            for reason in ("corrupted or not a safetensors file", "is not a Prisma SAE", "does not match", "NaN")
        ), message
        assert not marker.exists()  # a pickle inside is never unpickled
    finally:
        weights.write_bytes(original)
    stored.assert_earlier_work_intact(workspace)


# -- Ollama fails while labelling a run -------------------------------------------------------------------------


@pytest.fixture
def labelling_state(stored: Stored) -> tuple[Workspace, pd.DataFrame]:
    workspace = Workspace(stored.path)
    return workspace, workspace.labels.of(stored.run_a)


def test_unreachable_ollama_is_reported_before_anything_is_written(stored: Stored, labelling_state) -> None:
    workspace, labels_before = labelling_state
    url = closed_port_url()
    with pytest.raises(LabellingError, match=f"Ollama is not reachable at {url}"):
        label_run(
            workspace,
            pipeline.load_run(workspace, stored.run_a),
            ollama_labeller(OllamaConfig(host=url, timeout_s=2.0)),
            feature_ids=range(5),
        )
    pd.testing.assert_frame_equal(workspace.labels.of(stored.run_a), labels_before)


@pytest.mark.parametrize("fault", ["slow", "malformed-json"])
def test_failing_ollama_stops_the_batch_and_keeps_every_label(stored: Stored, labelling_state, fault: str) -> None:
    workspace, labels_before = labelling_state
    with running_fake_ollama() as fake:
        if fault == "slow":
            fake.delay_s = 30.0
        else:
            fake.responder = lambda request: '{"label": "unterminated'
        summary = label_run(
            workspace,
            pipeline.load_run(workspace, stored.run_a),
            ollama_labeller(OllamaConfig(host=fake.url, timeout_s=0.5, max_retries=1)),
            LabelConfig(max_consecutive_failures=2),
        )
    assert (summary.n_labelled, summary.n_failed) == (0, 2)
    assert summary.n_remaining == int((workspace.feature_stats.of(stored.run_a)["density"] > 0).sum()) - 2
    reason = "did not answer within" if fault == "slow" else "no usable answer in 2 attempts"
    assert reason in summary.first_error
    assert summary.stop_reason.startswith("Stopped after 2 failures in a row")
    pd.testing.assert_frame_equal(workspace.labels.of(stored.run_a), labels_before)
    assert set(workspace.labels.of(stored.run_a)["source"]) == {"keywords"}


# -- a moved workspace, a damaged run in the app -----------------------------------------------------------------


def test_a_moved_workspace_still_opens_its_runs(stored: Stored, tmp_path: Path) -> None:
    moved = Workspace(shutil.copytree(stored.path, tmp_path / "moved elsewhere"))
    record = moved.run(stored.run_a)
    assert Path(record.weights_dir).is_relative_to(moved.path)
    np.testing.assert_array_equal(pipeline.load_run(moved, stored.run_a).codes.toarray(), stored.codes_a)


@pytest.fixture
def damaged_copy(stored: Stored, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """A copy of the workspace whose run has truncated weights, opened by the app."""
    copy = Workspace(shutil.copytree(stored.path, tmp_path / "damaged"))
    weights = Path(copy.run(stored.run_a).weights_dir) / WEIGHTS_FILE
    weights.write_bytes(weights.read_bytes()[:1000])
    monkeypatch.setenv(WORKSPACE_ENV, str(copy.path))
    return copy


@pytest.mark.parametrize("page", ["features", "families", "explore"])
def test_app_says_a_damaged_run_cannot_be_opened(stored: Stored, damaged_copy: Workspace, page: str) -> None:
    at = open_page(new_app(stored.dataset_a, stored.run_a), page)
    assert not at.exception
    (error,) = texts(at.error)
    assert error.startswith("This SAE run cannot be opened: ")
    assert "sae.safetensors is corrupted or not a safetensors file" in error


def test_app_names_a_damaged_table_and_its_repair_in_plain_words(
    stored: Stored, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files of the features table removed behind the app's back (a damaged disk, a bucket emptied by hand): the page
    names the damaged table, says the other tables are not affected and how to repair it; no traceback."""
    copy = Workspace(shutil.copytree(stored.path, tmp_path / "damaged table"))
    for data_file in (copy.path / "lancedb" / "features.lance" / "data").iterdir():
        data_file.unlink()
    monkeypatch.setenv(WORKSPACE_ENV, str(copy.path))
    at = open_page(new_app(stored.dataset_a, stored.run_a), "features")
    (error,) = texts(at.error)
    assert error.startswith("This SAE run cannot be opened: The workspace's features table cannot be read (Not found")
    assert "lance error" not in error and ".rs:" not in error  # LanceDB's prefix and source location left out
    assert "The other tables are not affected" in error and "python -m prisma_core repair" in error
    assert not at.exception
    stored.assert_earlier_work_intact(Workspace(stored.path))


def test_a_damaged_run_can_be_deleted_from_the_train_page(stored: Stored, damaged_copy: Workspace) -> None:
    at = open_page(new_app(stored.dataset_a, stored.run_a), "train")
    assert not at.exception
    (error,) = texts(at.error)
    assert error.startswith("This run cannot be opened: ") and error.endswith("Delete it below and train again.")
    at.checkbox(key=f"confirm_run_{stored.run_a}").check().run()
    at.button(key="delete_run").click().run()
    assert not at.exception and not at.error
    assert damaged_copy.runs() == [] and not (damaged_copy.path / "runs" / stored.run_a).exists()
    stored.assert_earlier_work_intact(Workspace(stored.path))  # the original is untouched


# -- round 4: a model neither here nor reachable ----------------------------------------------------------------------

REMOTE_MODEL = "sentence-transformers/all-mpnet-base-v2"


def processes_naming(needle: str) -> list[int]:
    """The ids of the running processes whose command line holds `needle`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if needle in command and int(entry.name) != os.getpid():
                found.append(int(entry.name))
    return found


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        ({"HF_HUB_OFFLINE": "1"}, "and downloading is turned off (HF_HUB_OFFLINE is set)"),
        ({"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "{closed}"}, "and {closed} cannot be reached to download it"),
    ],
)
def test_a_model_neither_here_nor_reachable_is_refused_at_once(
    stored: Stored, tmp_path: Path, environment: dict[str, str], expected: str
) -> None:
    closed = closed_port_url()
    env = os.environ | {"HF_HOME": str(tmp_path / "hf"), "PRISMA_CACHE_DIR": str(tmp_path / "cache")}
    env |= {name: value.format(closed=closed) for name, value in environment.items()}
    before = snapshot(Workspace(stored.path))
    done = subprocess.run(
        cli_command("embed", "--model", REMOTE_MODEL, "--dataset", stored.dataset_b, workspace=stored.path),
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,  # a hang guard: it took minutes before
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    (message,) = error_lines(done.stderr)
    assert message == (
        f"error: The embedding model '{REMOTE_MODEL}' is not on this machine, {expected.format(closed=closed)}"
        f"{' (ConnectError)' if 'HF_ENDPOINT' in environment else ''}. Use the bundled 'all-MiniLM-L6-v2', a local "
        "model folder, or a model downloaded beforehand."
    )
    assert "Traceback" not in done.stderr and processes_naming(str(tmp_path / "cache")) == []
    assert not (tmp_path / "cache" / "openvino").exists()  # no conversion was even started
    assert snapshot(Workspace(stored.path)) == before


def test_a_conversion_ends_with_the_process_that_started_it(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    script = (
        "from prisma_core.embed import EmbedConfig, openvino_backend; "
        "openvino_backend.load_encoder(EmbedConfig(precision='int8', backend='openvino'))"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], cwd=REPO, env=os.environ | {"PRISMA_CACHE_DIR": str(cache)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    while not (children := processes_naming(f"_convert_to_cache('all-MiniLM-L6-v2', '{cache}")):
        assert parent.poll() is None, "the conversion ended before it could be watched"
        time.sleep(0.05)
    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=30)
    deadline = time.monotonic() + 60  # a guard: it goes within about a second; quantizing alone takes far longer
    while processes_naming(f"_convert_to_cache('all-MiniLM-L6-v2', '{cache}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_naming(f"_convert_to_cache('all-MiniLM-L6-v2', '{cache}") == [], children
    assert not list(cache.glob("openvino/*/model.xml"))  # it ended before writing a model
