"""The `Embedder` seam: the backends registered in one place, chunk-and-average over any of them, the local backends'
vectors unchanged by it, and an API embedder (Ollama's /api/embed, served on loopback with the bundled model's real
vectors) embedding a dataset through the pipeline into its own vector space; a bad reply stores nothing."""

import importlib
from collections.abc import Iterator
from typing import get_args

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from cached_vectors import SHARED_SPACE
from labelling_run import store_snapshot
from ollama_server import FakeOllama, embedded, running_fake_ollama

from bench import common
from prisma_core import pipeline
from prisma_core.embed import (
    EmbedConfig,
    average_by_document,
    embed_documents,
    embed_texts,
    load_encoder,
    model_key,
    plan_chunks,
)
from prisma_core.embed import config as embed_config
from prisma_core.embed.backends import BACKEND_CHOICES, BACKENDS
from prisma_core.embed.chunking import encode_chunks
from prisma_core.embed.embedder import LocalEmbedder, pooler_of, windows_per_batch
from prisma_core.embed.model import (
    GPU_BYTES_PER_TOKEN_AND_DIMENSION,
    GPU_MAX_BATCH_TOKENS,
    GPU_MEMORY_SHARE,
    MAX_BATCH_TOKENS,
    bounded,
    gpu_batch_tokens,
    padded_length,
)
from prisma_core.embed.ollama_backend import CHARS_PER_TOKEN, TIMEOUT_ENV, WINDOW_TOKENS, split_words
from prisma_core.errors import EmbeddingError
from prisma_core.ingest import IngestConfig
from prisma_core.store import Workspace

OLLAMA = EmbedConfig(backend="ollama", model="all-minilm", batch_size=4)


def test_the_registry_lists_each_backend_once_and_each_builds_an_embedder():
    assert list(BACKENDS) == ["torch", "openvino", "ollama"]
    assert len({backend.module for backend in BACKENDS.values()}) == len(BACKENDS)
    assert len({backend.space_tag for backend in BACKENDS.values()}) == len(BACKENDS)
    assert get_args(embed_config.Backend) == BACKEND_CHOICES == ("auto", *BACKENDS)
    assert all(callable(importlib.import_module(b.module).load_embedder) for b in BACKENDS.values())


def previous_path(texts: list[str], config: EmbedConfig) -> np.ndarray:
    """The chunk-and-average of the code before the seam: the backend's encoder and pooler, windows by its tokenizer."""
    encoder, pool = load_encoder(config)
    chunking = plan_chunks(encoder, texts)
    chunks, _ = encode_chunks(bounded(pool), chunking.chunk_ids, encoder.dimension, config.batch_size)
    return average_by_document(chunks, chunking.chunk_owner, len(texts))


def shared_texts(corpus: str, n: int) -> pd.DataFrame:
    return pd.read_parquet(common.CORPORA_DIR / f"{corpus}.parquet").head(n)


@pytest.mark.parametrize(
    ("config", "key"),
    [
        (EmbedConfig(backend="torch", precision="fp32"), "all-MiniLM-L6-v2|fp32"),
        (SHARED_SPACE, "all-MiniLM-L6-v2|openvino-fp32"),
    ],
)
def test_the_local_backends_give_the_vectors_and_vector_space_of_the_path_before_the_seam(config, key):
    texts = [*shared_texts("mtsamples", 3)["text"], *shared_texts("bbc_news", 3)["text"]]  # several windows each

    through_the_seam = embed_documents(texts, config, passages=True)

    assert model_key(config) == key  # existing caches are still found
    assert (through_the_seam.chunking.chunks_per_doc[:3] > 1).all()
    np.testing.assert_array_equal(through_the_seam.vectors, previous_path(texts, config))
    np.testing.assert_array_equal(embed_texts(texts, config), through_the_seam.vectors)


def ingested(tmp_path, frame: pd.DataFrame) -> tuple[Workspace, str]:
    frame.to_parquet(tmp_path / "docs.parquet")
    workspace = Workspace(tmp_path / "workspace")
    dataset_id, _ = pipeline.ingest(workspace, [tmp_path / "docs.parquet"], "docs", IngestConfig(id_column="id"))
    return workspace, dataset_id


def test_openvino_fp32_through_the_seam_gives_the_shared_corpus_vectors(tmp_path):
    workspace, dataset_id = ingested(tmp_path, shared_texts("mtsamples", 4)[["id", "text"]])

    summary = pipeline.embed_dataset(workspace, dataset_id, SHARED_SPACE)

    assert summary.n_computed == 4
    stored = workspace.documents(dataset_id, ["position", "text_hash"])
    shared = pq.read_table(common.CORPORA_DIR / "mtsamples.vectors.parquet").to_pandas().set_index("text_hash")
    expected = np.stack(shared.loc[stored["text_hash"], "vector"].to_list())
    vectors = workspace.stored_vectors(dataset_id, model_key(SHARED_SPACE)).all()
    np.testing.assert_array_equal(vectors, expected)


@pytest.fixture
def fake(monkeypatch) -> Iterator[FakeOllama]:
    with running_fake_ollama(models=["all-minilm:latest"]) as server:
        monkeypatch.setenv("OLLAMA_HOST", server.url)
        monkeypatch.setenv(TIMEOUT_ENV, "5")
        yield server


def test_words_are_cut_into_contiguous_windows_the_model_reads_whole():
    text = "alpha beta " * 300 + "x" * 2_000
    windows = split_words(text, WINDOW_TOKENS * CHARS_PER_TOKEN)
    assert " ".join(windows).split() != text.split()  # the long word was cut ...
    assert "".join(" ".join(windows).split()) == "".join(text.split())  # ... and nothing was lost or repeated
    assert all(len(window) <= WINDOW_TOKENS * CHARS_PER_TOKEN for window in windows)
    assert split_words("", 10) == [""] and split_words("one two", 10) == ["one two"]


def test_the_ollama_embedder_embeds_a_dataset_through_the_pipeline_into_its_own_space(tmp_path, fake):
    notes = shared_texts("mtsamples", 40)
    frame = notes[notes["text"].str.len() > 3_000].head(5)[["id", "text"]].reset_index(drop=True)
    frame.loc[4, "text"] = "A short note."
    workspace, dataset_id = ingested(tmp_path, frame)

    summary = pipeline.embed_dataset(workspace, dataset_id, OLLAMA)

    key = model_key(OLLAMA)
    assert key == "all-minilm|ollama" and summary.n_computed == 5
    texts = workspace.documents(dataset_id, ["position", "text"])["text"].tolist()
    windows = [split_words(text, WINDOW_TOKENS * CHARS_PER_TOKEN) for text in texts]
    counts = sorted(len(per_text) for per_text in windows)
    assert counts[0] == 1 and counts[1] >= 4  # the short note whole, the notes (over 3,000 characters) in windows
    sent = [text for request in fake.embed_requests for text in request["input"]]
    assert sorted(sent) == sorted(window for per_text in windows for window in per_text)
    assert {request["model"] for request in fake.embed_requests} == {"all-minilm"}
    assert max(len(request["input"]) for request in fake.embed_requests) <= OLLAMA.batch_size
    bundled = EmbedConfig(precision="fp32", backend="torch")  # what the fake server computes with
    expected = np.stack([embed_texts(per_text, bundled).mean(axis=0) for per_text in windows])
    vectors = workspace.stored_vectors(dataset_id, key).all()
    np.testing.assert_allclose(vectors, expected, rtol=0, atol=1e-6)  # each document: the mean of its windows
    assert not workspace.has_vectors(dataset_id, model_key(EmbedConfig()))  # a vector space of its own
    [record] = [stage for stage in workspace.stage_records.of(dataset_id) if stage.stage == "embedding"]
    assert record.config["backend"] == "ollama" and record.summary["n_computed"] == 5


def _ragged(request):
    reply = embedded(request)
    reply["embeddings"][-1] = reply["embeddings"][-1][:-1]
    return reply


def _one_short(request):
    reply = embedded(request)
    reply["embeddings"] = reply["embeddings"][:-1]
    return reply


def _not_numbers(request):
    reply = embedded(request)
    reply["embeddings"][0][3] = "lots"
    return reply


def _second_reply_narrower(fake: FakeOllama):
    def reply(request):
        answer = embedded(request)
        if len(fake.embed_requests) > 1:
            answer["embeddings"] = [row[:100] for row in answer["embeddings"]]
        return answer

    return reply


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("ragged", "vectors of 383 and 384 numbers"),
        ("one short", "sent 3 vectors for 4 texts"),
        ("not numbers", "did not reply like Ollama does"),
        ("narrower later", "vectors of 100 numbers where 384 were expected"),
        ("slow", "did not embed within 1 s"),
        ("unknown model", "has no model 'all-minilm'"),
    ],
)
def test_a_bad_reply_raises_the_typed_error_and_stores_nothing(tmp_path, fake, monkeypatch, fault, message):
    workspace, dataset_id = ingested(tmp_path, shared_texts("bbc_news", 6)[["id", "text"]])
    before = store_snapshot(workspace)
    scripted = {"ragged": _ragged, "one short": _one_short, "not numbers": _not_numbers}
    fake.embed_reply = scripted.get(fault) or (_second_reply_narrower(fake) if fault == "narrower later" else None)
    if fault == "slow":
        monkeypatch.setenv(TIMEOUT_ENV, "1")
        fake.delay_s = 3.0
    if fault == "unknown model":
        fake.models = ["llama3.2:latest"]

    with pytest.raises(EmbeddingError, match=message):
        pipeline.embed_dataset(workspace, dataset_id, OLLAMA)

    assert store_snapshot(workspace) == before
    assert not workspace.has_vectors(dataset_id, model_key(OLLAMA))


def test_the_command_line_embeds_with_the_ollama_backend(tmp_path, fake, capsys):
    """Run in this process (`main` is what `python -m prisma_core` runs), against the loopback server of OLLAMA_HOST."""
    from prisma_core.cli import main

    workspace, dataset_id = ingested(tmp_path, shared_texts("bbc_news", 3)[["id", "text"]])
    arguments = ["embed", "--backend", "ollama", "--model", "all-minilm", "--workspace", str(workspace.path)]

    assert main(arguments) == 0, capsys.readouterr().err

    assert Workspace(workspace.path).stored_vectors(dataset_id, "all-minilm|ollama").all().shape == (3, 384)
    assert fake.embed_requests and {request["model"] for request in fake.embed_requests} == {"all-minilm"}


def test_a_gpu_pools_as_many_tokens_as_its_share_of_free_memory_holds_within_bounds():
    width = 384
    per_token = GPU_BYTES_PER_TOKEN_AND_DIMENSION * width
    assert gpu_batch_tokens(0, width) == MAX_BATCH_TOKENS  # never fewer than a CPU pools
    assert gpu_batch_tokens(int(per_token * 20_000 / GPU_MEMORY_SHARE), width) == 20_000
    assert gpu_batch_tokens(int(per_token * 20_000 / GPU_MEMORY_SHARE), 2 * width) == 10_000  # a wider model
    assert gpu_batch_tokens(80 * 2**30, width) == GPU_MAX_BATCH_TOKENS


def test_an_embedder_pooling_more_tokens_at_once_gets_larger_batches_and_the_same_vectors():
    spec, pooler = load_encoder(EmbedConfig(backend="torch", precision="fp32", device="cpu"))
    padded_tokens: list[int] = []

    def counted(windows, spans=None):
        padded_tokens.append(len(windows) * padded_length(max(map(len, windows))))
        return pooler(windows, spans)

    cpu, gpu_like = LocalEmbedder(spec, counted), LocalEmbedder(spec, counted, max_batch_tokens=16_384)
    assert windows_per_batch(cpu, 16) == 16  # a CPU keeps the setting
    assert windows_per_batch(gpu_like, 16) == 16_384 // spec.max_seq_length
    assert windows_per_batch(gpu_like, 500) == 500  # a larger setting stays
    chunk_ids = cpu.windows(shared_texts("bbc_news", 30)["text"].tolist()).chunk_ids
    vectors = {}
    for name, embedder in (("cpu", cpu), ("gpu_like", gpu_like)):
        padded_tokens.clear()
        batch = windows_per_batch(embedder, 16)
        vectors[name], _ = encode_chunks(pooler_of(embedder), chunk_ids, spec.dimension, batch)
        assert max(padded_tokens) <= embedder.max_batch_tokens
        vectors[f"{name}_calls"] = len(padded_tokens)
    assert vectors["gpu_like_calls"] <= vectors["cpu_calls"] / 4
    np.testing.assert_allclose(vectors["gpu_like"], vectors["cpu"], atol=1e-5)
