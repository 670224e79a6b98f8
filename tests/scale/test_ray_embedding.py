"""Embedding on a real Ray cluster: one local head node (2 CPUs, loopback) started with `ray start --head` for the
module, reached by its address as a user would reach theirs."""

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench.ray_scaling import local_cluster
from prisma_core import pipeline
from prisma_core.cli import build_parser, config_from_args
from prisma_core.embed import EmbedConfig, model_key
from prisma_core.errors import EmbeddingError
from prisma_core.ingest import IngestConfig
from prisma_core.pipeline import ray_embedding
from prisma_core.pipeline.ray_embedding import RayCluster
from prisma_core.progress import Progress
from prisma_core.store import Workspace

pytestmark = pytest.mark.slow  # starts a Ray cluster and its workers
REPO = Path(__file__).resolve().parents[2]
N_ARTICLES = 40
INGEST = IngestConfig(text_column="text", id_column="id")


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    """The address of a Ray head node (2 CPUs) started for this module, stopped afterwards."""
    with local_cluster(cpus=2) as address:
        yield address


@dataclass(frozen=True)
class Local:
    """The articles embedded on this machine: the reference the cluster's vectors are compared with."""

    parquet: Path
    key: str
    vectors: np.ndarray


@pytest.fixture(scope="module")
def local(bbc: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> Local:
    folder = tmp_path_factory.mktemp("local")
    parquet = folder / "bbc40.parquet"
    bbc.head(N_ARTICLES)[["id", "text", "label"]].to_parquet(parquet)
    workspace = Workspace(folder / "ws")
    dataset_id, _ = pipeline.ingest(workspace, [parquet], "bbc40", INGEST)
    summary = pipeline.embed_dataset(workspace, dataset_id, EmbedConfig(ray_address=""))
    return Local(parquet, summary.embedding_key, workspace.vectors(dataset_id, summary.embedding_key))


def _fresh(local: Local, folder: Path) -> tuple[Workspace, str]:
    workspace = Workspace(folder)
    dataset_id, _ = pipeline.ingest(workspace, [local.parquet], "bbc40", INGEST)
    return workspace, dataset_id


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_two_ray_workers_store_the_local_vectors_in_the_same_space(ray_address, local, tmp_path):
    workspace, dataset_id = _fresh(local, tmp_path / "ws")
    events: list[Progress] = []
    config = EmbedConfig(ray_address=ray_address, ray_workers=2)
    summary = pipeline.embed_dataset(workspace, dataset_id, config, events.append, slice_documents=16)
    assert summary.embedding_key == local.key == model_key(EmbedConfig(ray_address=""))
    assert (summary.n_computed, summary.n_cached) == (N_ARTICLES, 0)
    assert summary.n_chunks >= N_ARTICLES and summary.n_tokens > 100 * N_ARTICLES
    assert _cosines(workspace.vectors(dataset_id, summary.embedding_key), local.vectors).min() >= 0.9999
    assert [event.done for event in events] == sorted(event.done for event in events)
    assert events[-1] == Progress("embed", N_ARTICLES, N_ARTICLES, f"{N_ARTICLES} of {N_ARTICLES} documents")
    assert summary.n_passages == workspace.passages.rows(summary.embedding_key) == 0  # left to pipeline.passages:
    found = pipeline.passages(workspace, dataset_id, [0, 1])  # computed here when first asked for, then stored
    assert sorted(set(found.position.tolist())) == [0, 1]
    assert workspace.passages.rows(summary.embedding_key) == len(found)


def test_documents_already_stored_are_not_sent_to_the_cluster(ray_address, local, tmp_path):
    """An embedding interrupted half way (half the vectors stored) resumes on the cluster with the other half only."""
    workspace, dataset_id = _fresh(local, tmp_path / "ws")
    half = N_ARTICLES // 2
    workspace.save_vectors(dataset_id, local.key, local.vectors[:half], np.arange(half))
    events: list[Progress] = []
    config = EmbedConfig(ray_address=ray_address, ray_workers=2)
    summary = pipeline.embed_dataset(workspace, dataset_id, config, events.append)
    assert (summary.n_computed, summary.n_cached) == (N_ARTICLES - half, half)
    assert {event.total for event in events} == {N_ARTICLES - half}
    stored = workspace.vectors(dataset_id, local.key)
    assert np.array_equal(stored[:half], local.vectors[:half])
    assert _cosines(stored, local.vectors).min() >= 0.9999


def test_an_unreachable_cluster_is_a_clear_error_and_stores_nothing(local, tmp_path):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"
    workspace, dataset_id = _fresh(local, tmp_path / "ws")
    with pytest.raises(EmbeddingError, match=f"Cannot reach the Ray cluster at '{address}'.*ray start --head"):
        pipeline.embed_dataset(workspace, dataset_id, EmbedConfig(ray_address=address))
    assert workspace.stored_positions(dataset_id, local.key) == set()


def test_without_ray_installed_an_address_says_how_to_install_it(local, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as it does where ray is not installed
    workspace, dataset_id = _fresh(local, tmp_path / "ws")
    with pytest.raises(EmbeddingError, match=r"Ray cluster at 'host:6379' needs the ray package: pip install"):
        pipeline.embed_dataset(workspace, dataset_id, EmbedConfig(ray_address="host:6379"))
    assert workspace.stored_positions(dataset_id, local.key) == set()
    assert pipeline.embed_dataset(workspace, dataset_id, EmbedConfig(ray_address="")).n_computed == N_ARTICLES


def test_the_address_defaults_to_the_environment_and_leaves_the_vector_space_alone(monkeypatch):
    monkeypatch.setenv("PRISMA_RAY_ADDRESS", "ray://cluster:10001")
    assert EmbedConfig().ray_address == "ray://cluster:10001"
    assert EmbedConfig(ray_address="").ray_address == ""
    assert model_key(EmbedConfig()) == model_key(EmbedConfig(ray_address=""))


def test_cli_embeds_on_the_cluster_given_by_ray_address(ray_address, local, tmp_path):
    workspace_dir = tmp_path / "ws"
    workspace, dataset_id = _fresh(local, workspace_dir)
    command = [sys.executable, "-m", "prisma_core", "embed", "--workspace", str(workspace_dir)]
    command += ["--ray-address", ray_address, "--ray-workers", "2"]
    environment = os.environ | {"PRISMA_RAY_ADDRESS": "ray://nowhere:1"}  # the flag wins over the environment
    result = subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert f"embedded {N_ARTICLES} documents ({local.key}): {N_ARTICLES} computed" in result.stdout
    assert _cosines(workspace.vectors(dataset_id, local.key), local.vectors).min() >= 0.9999


def test_run_takes_the_ray_address_flag_unprefixed():
    """`run` prefixes its embedding flags (--embed-batch-size, beside the SAE's --batch-size) but not the Ray ones."""
    args = build_parser().parse_args(["run", "notes.csv", "--ray-address", "auto", "--embed-batch-size", "8"])
    assert config_from_args(EmbedConfig, args, "embed_") == EmbedConfig(ray_address="auto", batch_size=8)


def test_workers_take_the_clusters_gpus_when_the_vector_space_runs_on_torch():
    """Which device and resources the workers get, from the cluster's resources (no cluster needed to decide it)."""
    with_gpus = RayCluster("head:6379", {"CPU": 16.0, "GPU": 2.0})
    on_torch = with_gpus.worker_config(EmbedConfig(backend="torch", precision="fp32", ray_address="head:6379"))
    assert (on_torch.device, on_torch.backend, on_torch.precision) == ("cuda", "torch", "fp32")
    assert on_torch.ray_address == ""  # the workers embed where they are
    assert model_key(on_torch) == model_key(EmbedConfig(backend="torch", precision="fp32"))
    assert with_gpus.workers("cuda", None) == (2, {"num_gpus": 1})
    on_cpu = with_gpus.worker_config(EmbedConfig(backend="torch", precision="fp32", device="cpu"))
    assert on_cpu.device == "cpu" and with_gpus.workers("cpu", None) == (4, {"num_cpus": 4})
    assert with_gpus.workers("cpu", 3) == (3, {"num_cpus": 5})
    cpus_only = RayCluster("head:6379", {"CPU": 2.0})
    assert cpus_only.worker_config(EmbedConfig(backend="torch", precision="fp32")).device == "cpu"
    assert cpus_only.workers("cpu", 2) == (2, {"num_cpus": 1})
    with pytest.raises(EmbeddingError, match="The Ray cluster at 'head:6379' has no GPU"):
        cpus_only.worker_config(EmbedConfig(device="cuda"))


def test_a_gpu_asked_of_a_cluster_without_one_fails_before_anything_is_stored(ray_address, local, tmp_path):
    workspace, dataset_id = _fresh(local, tmp_path / "ws")
    config = EmbedConfig(ray_address=ray_address, device="cuda")
    with pytest.raises(EmbeddingError, match=f"The Ray cluster at '{ray_address}' has no GPU"):
        pipeline.embed_dataset(workspace, dataset_id, config)
    assert workspace.stored_positions(dataset_id, model_key(config)) == set()


def test_a_worker_that_cannot_load_the_model_fails_with_its_own_message(ray_address):
    """An error raised on a worker (here: a model folder the workers cannot read) comes back as an EmbeddingError
    with the worker's message, not Ray's traceback."""
    missing = pd.DataFrame({"text_hash": ["a", "b"], "text": ["first note", "second note"]})
    unreadable = EmbedConfig(model="/nonexistent/model", backend="torch", precision="fp32", device="cpu")
    with ray_embedding.connected(ray_address) as cluster:
        compute = cluster.embedding(unreadable)
        with pytest.raises(EmbeddingError) as raised:
            list(compute(missing, lambda event: None, 10))
    assert str(raised.value) == (
        f"Embedding on the Ray cluster at '{ray_address}' failed: The embedding model '/nonexistent/model' is "
        "neither a folder here nor a model id. Use the bundled 'all-MiniLM-L6-v2', a local model folder, or a model "
        "downloaded beforehand."
    )
