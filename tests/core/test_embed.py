import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import get_args

import numpy as np
import pytest
import sentence_transformers
import torch

from prisma_core import embed
from prisma_core.embed import (
    DEFAULT_MODEL,
    EmbedConfig,
    cpu_has_native_bf16,
    embed_documents,
    embed_texts,
    load_model,
    model_key,
    openvino_backend,
    openvino_cache,
    openvino_runtime,
    plan_chunks,
    resolve_backend,
    resolve_precision,
)
from prisma_core.embed import chunking as chunking_module
from prisma_core.embed import config as embed_config
from prisma_core.embed import model as embed_model
from prisma_core.embed.chunking import encode_chunks
from prisma_core.embed.faithful import fast_candidates
from prisma_core.embed.model import resolve_model_path
from prisma_core.embed.torch_backend import torch_pooler
from prisma_core.errors import EmbeddingError

FP32 = EmbedConfig(precision="fp32")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def encoder():
    return load_model(DEFAULT_MODEL, "cpu", "fp32")


def encode_one_chunk(encoder, content_ids: list[int]) -> np.ndarray:
    """Independent reference: wrap one window in [CLS] ... [SEP] and run the model on it alone."""
    tokenizer = encoder.tokenizer
    ids = torch.tensor([[tokenizer.cls_token_id, *content_ids, tokenizer.sep_token_id]])
    with torch.inference_mode():
        out = encoder({"input_ids": ids, "attention_mask": torch.ones_like(ids)})
    return out["sentence_embedding"][0].numpy()


def long_document(bbc, encoder, n_windows: int) -> str:
    """A real BBC article of about n_windows model windows (the last window at least half full)."""
    window = encoder.max_seq_length - 2
    lengths = [len(ids) for ids in encoder.tokenizer(bbc["text"].tolist(), add_special_tokens=False)["input_ids"]]
    low, high = (n_windows - 0.5) * window, n_windows * window
    return next(text for text, n in zip(bbc["text"], lengths, strict=True) if low < n <= high)


def test_window_is_model_limit_minus_special_tokens(encoder):
    chunking = plan_chunks(encoder, ["a short text"])
    assert chunking.window == 256 - 2
    assert chunking.chunks_per_doc.tolist() == [1]


def test_long_document_is_mean_of_its_chunks_encoded_one_by_one(bbc, encoder):
    text = long_document(bbc, encoder, 3)
    ids = encoder.tokenizer(text, add_special_tokens=False)["input_ids"]
    window = encoder.max_seq_length - 2
    chunking = plan_chunks(encoder, [text])
    assert chunking.chunks_per_doc.tolist() == [3]
    assert chunking.tokens_per_doc.tolist() == [len(ids)]
    chunks = [ids[start : start + window] for start in range(0, len(ids), window)]
    assert len(chunks) == 3 and all(len(c) == window for c in chunks[:2])
    expected = np.mean([encode_one_chunk(encoder, chunk) for chunk in chunks], axis=0)
    np.testing.assert_allclose(embed_texts([text], FP32)[0], expected, atol=1e-5)


def test_every_token_lands_in_exactly_one_chunk_of_its_own_document(bbc, encoder):
    texts = bbc["text"].head(150).tolist()  # more than two tokenizer groups (TOKENIZE_DOCUMENTS)
    assert len(texts) > 2 * chunking_module.TOKENIZE_DOCUMENTS
    chunking = plan_chunks(encoder, texts)
    token_ids = encoder.tokenizer(texts, add_special_tokens=False)["input_ids"]
    token_counts = [len(ids) for ids in token_ids]
    assert chunking.tokens_per_doc.tolist() == token_counts
    assert chunking.chunks_per_doc.tolist() == [-(-n // chunking.window) for n in token_counts]
    assert sum(len(ids) - 2 for ids in chunking.chunk_ids) == sum(token_counts)
    for document in (0, 63, 64, 65, 128, 149):  # on both sides of each group boundary
        windows = [chunking.chunk_ids[i][1:-1] for i in np.flatnonzero(chunking.chunk_owner == document)]
        assert [token for window in windows for token in window] == token_ids[document]


def test_short_documents_equal_plain_encode(encoder):
    texts = ["The central bank raised interest rates.", "A late goal won the match.", "New phone launched."]
    np.testing.assert_allclose(embed_texts(texts, FP32), encoder.encode(texts), atol=1e-5)


def test_batching_across_documents_equals_one_at_a_time(bbc, encoder):
    """Windows of very different lengths padded into shared batches: each document gets what it gets alone."""
    lengths = [20, 60, 120, 240, 360, 480] * 2  # words: BBC openings from a short line to two windows
    texts = [
        " ".join(text.split()[:n]) for text, n in zip(bbc["text"].sample(12, random_state=1), lengths, strict=True)
    ]
    assert sorted(set(plan_chunks(encoder, texts).chunks_per_doc.tolist())) == [1, 2]
    together = embed_texts(texts, EmbedConfig(precision="fp32", batch_size=8))
    alone = np.stack([embed_texts([t], FP32)[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_normalize_gives_unit_vectors(bbc):
    vectors = embed_texts(bbc["text"].head(5).tolist(), EmbedConfig(precision="fp32", normalize=True))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


@pytest.mark.slow  # loads and converts the model once more per backend
@pytest.mark.parametrize("backend", ["torch", "openvino"])
def test_bf16_fast_paths_match_fp32_direction(bbc, backend):
    texts = bbc["text"].head(16).tolist()
    fp32 = embed_texts(texts, FP32)
    bf16 = embed_texts(texts, EmbedConfig(precision="bf16", backend=backend))
    assert cosines(fp32, bf16).min() >= 0.999


@pytest.mark.slow  # converts the model twice, in child processes
def test_bf16_cache_keeps_fp16_weights_and_fp32_keeps_fp32_but_the_word_table(monkeypatch, tmp_path):
    """The compiled model keeps the weights it read: at bf16 they are all stored at fp16; at fp32 all but the word
    embedding table (fp16, widened as tokens are looked up) are fp32."""
    from safetensors.numpy import load_file

    monkeypatch.setenv("PRISMA_CACHE_DIR", str(tmp_path))
    sizes = {}
    for precision in ("fp32", "bf16"):
        folder = tmp_path / precision
        openvino_backend._convert_in_child(DEFAULT_MODEL, folder, precision)
        sizes[precision] = (folder / "model.bin").stat().st_size
    weights = load_file(Path(resolve_model_path(DEFAULT_MODEL)) / "model.safetensors")
    table = weights["embeddings.word_embeddings.weight"].size
    others = sum(array.size for name, array in weights.items() if name != "embeddings.word_embeddings.weight")
    assert sizes["fp32"] == pytest.approx(4 * others + 2 * table, rel=0.01)
    assert sizes["bf16"] == pytest.approx(2 * (others + table), rel=0.01)


@pytest.mark.slow  # converts the model to OpenVINO
def test_openvino_backend_pools_exactly_what_torch_pools(bbc, encoder):
    """Same windows, same pooling, same averaging: at fp32 the converted model gives the torch vectors (to 3e-5: its
    word embedding table is kept at fp16)."""
    texts = [long_document(bbc, encoder, 3), *bbc["text"].head(5)]
    torch_vectors = embed_documents(texts, FP32)
    openvino_vectors = embed_documents(texts, EmbedConfig(precision="fp32", backend="openvino"))
    assert openvino_vectors.chunking.chunks_per_doc.tolist() == torch_vectors.chunking.chunks_per_doc.tolist()
    assert openvino_vectors.chunking.chunks_per_doc[0] == 3
    np.testing.assert_allclose(openvino_vectors.vectors, torch_vectors.vectors, atol=3e-5)
    assert cosines(openvino_vectors.vectors, torch_vectors.vectors).min() >= 0.9999999


class ShapeRecorder:
    """The real compiled model, noting the shape of every batch it is given."""

    def __init__(self, compiled) -> None:
        self.compiled, self.shapes = compiled, []

    def create_infer_request(self):
        request, shapes = self.compiled.create_infer_request(), self.shapes

        class Recording:
            def infer(self, inputs, **options):
                shapes.append(inputs["input_ids"].shape)
                return request.infer(inputs, **options)

        return Recording()


@pytest.mark.slow  # converts the model to OpenVINO
def test_openvino_batches_come_in_few_shapes(bbc):
    """OpenVINO keeps kernels for every input shape it meets: batches padded by `padded_length` meet at most 14 lengths
    (steps of 8 up to 64 tokens, of 32 above), where padding to the longest chunk met one per length."""
    compiled, cached = openvino_backend._compiled(DEFAULT_MODEL, "fp32")
    recorder = ShapeRecorder(compiled)
    texts = bbc["text"].head(30).tolist() + [text[: 40 * n] for n, text in enumerate(bbc["text"].head(60), 1)]
    chunking = plan_chunks(cached, texts)
    pool = embed_model.bounded(openvino_runtime.openvino_pooler(recorder, cached.tokenizer))
    padded, _ = encode_chunks(pool, chunking.chunk_ids, cached.get_embedding_dimension(), 16)
    lengths = {length for _, length in recorder.shapes}
    assert len({len(ids) for ids in chunking.chunk_ids}) > 40  # many distinct chunk lengths went in ...
    assert lengths <= {*range(8, 65, 8), *range(96, 257, 32)}  # ... and at most 14 batch lengths came out
    assert {length for length in lengths if length <= 64} and {length for length in lengths if length > 64}
    exact = np.stack(
        [compiled.create_infer_request().infer(single(cached, ids))[0][0] for ids in chunking.chunk_ids[:8]]
    )
    np.testing.assert_allclose(padded[:8], exact, atol=1e-5)  # padding is masked: the same vectors


def single(cached, ids: list[int]) -> dict[str, np.ndarray]:
    return {"input_ids": np.asarray([ids], np.int64), "attention_mask": np.ones((1, len(ids)), np.int64)}


@pytest.mark.parametrize(
    ("native_bf16", "installed", "config", "backend", "space"),
    [
        (True, True, EmbedConfig(), "openvino", "openvino-bf16"),
        (True, False, EmbedConfig(), "torch", "bf16"),
        (False, True, EmbedConfig(), "openvino", "openvino-fp32"),  # the bundled model builds without torch
        (False, False, EmbedConfig(), "torch", "fp32"),
        (False, True, EmbedConfig(precision="fp32"), "torch", "fp32"),
        (True, True, EmbedConfig(precision="fp32"), "torch", "fp32"),
        (True, True, EmbedConfig(backend="torch"), "torch", "bf16"),
        (False, True, EmbedConfig(backend="openvino"), "openvino", "openvino-fp32"),
    ],
)
def test_auto_backend_is_openvino_on_a_cpu_unless_fp32_is_asked_for(
    monkeypatch, native_bf16, installed, config, backend, space
):
    monkeypatch.setattr(embed_config, "cpu_has_native_bf16", lambda: native_bf16)
    monkeypatch.setattr(embed, "openvino_installed", lambda: installed)
    monkeypatch.setattr(embed, "cpu_has_int8_dot_product", lambda: False)  # int8: tests/core/test_int8.py
    assert resolve_backend(config) == backend
    assert model_key(config) == f"{DEFAULT_MODEL}|{space}"


@pytest.mark.parametrize(
    ("flags", "space", "candidates"),
    [
        ("sse4_2 avx avx2 fma", "openvino-fp32", []),  # an AVX2-only laptop: nothing faster to try
        ("avx2 avx512f avx512_bf16", "openvino-bf16", ["bf16"]),  # native bf16, no int8 dot products
    ],
)
def test_prisma_cpu_flags_make_auto_choose_as_on_that_cpu(monkeypatch, flags, space, candidates):
    """PRISMA_CPU_FLAGS stands in for the CPU's flags, so the suite can take the numeric path another CPU would."""
    monkeypatch.setenv(embed_config.CPU_FLAGS_ENV, flags)
    assert embed_config.cpu_flags() == set(flags.split())
    assert model_key(EmbedConfig()) == f"{DEFAULT_MODEL}|{space}"
    assert fast_candidates(EmbedConfig()) == candidates
    monkeypatch.delenv(embed_config.CPU_FLAGS_ENV)
    assert {"sse2", "fpu"} <= embed_config.cpu_flags()  # this machine's own, read from /proc/cpuinfo


def test_openvino_backend_that_cannot_run_says_why(monkeypatch):
    with pytest.raises(EmbeddingError, match="CPU only"):
        resolve_backend(EmbedConfig(backend="openvino", device="cuda"))
    monkeypatch.setattr(embed, "openvino_installed", lambda: False)
    with pytest.raises(EmbeddingError, match="pip install openvino"):
        model_key(EmbedConfig(backend="openvino"))
    with pytest.raises(ValueError, match="backend must be"):
        EmbedConfig(backend="onnx")  # type: ignore[arg-type]


def test_auto_precision_uses_bf16_only_where_the_cpu_has_it():
    assert resolve_precision("auto", "cpu") == ("bf16" if cpu_has_native_bf16() else "fp32")
    assert resolve_precision("fp32", "cpu") == "fp32"
    assert resolve_precision("auto", "mps") == "fp32"


def test_embedding_reports_chunk_statistics(bbc):
    texts = bbc["text"].head(6).tolist()
    embedded = embed_documents(texts, FP32)
    assert embedded.vectors.shape == (6, 384)
    assert embedded.chunking.chunks_per_doc.sum() == len(embedded.chunking.chunk_ids)


def test_unknown_model_raises_embedding_error(tmp_path):
    with pytest.raises(EmbeddingError, match="Could not load the embedding model"):
        load_model(str(tmp_path / "no-such-model"), "cpu", "fp32")


def test_sessions_asking_for_a_model_at_once_share_one_load(monkeypatch):
    """Five app sessions searching at the same moment must not each load (or convert) the model."""
    constructed = []
    real = sentence_transformers.SentenceTransformer

    def counting(*args, **kwargs):
        constructed.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", counting)
    embed_model._load_model.cache_clear()
    with ThreadPoolExecutor(5) as pool:
        models = list(pool.map(lambda _: load_model(DEFAULT_MODEL, "cpu", "fp32"), range(5)))
    assert len(constructed) == 1
    assert all(model is models[0] for model in models)


def test_large_batches_are_pooled_in_parts_of_bounded_tokens(encoder):
    """A model's working memory grows with the tokens of a batch: 1,024 label candidates at once are pooled in parts
    of at most the token budget, counted as OpenVINO pads them (`padded_length`), into the vectors the whole batch
    gives."""
    pool = torch_pooler(encoder)
    pooled_tokens: list[int] = []

    def recording(batch: list[list[int]], spans: np.ndarray | None = None) -> embed_model.Pooled:
        pooled_tokens.append(len(batch) * embed_model.padded_length(max(len(ids) for ids in batch)))
        return pool(batch, spans)

    windows = encoder.tokenizer([f"note {i} on chest pain and shortness of breath" for i in range(1024)])["input_ids"]
    spans = np.array([[row, 1, len(windows[row]) - 1] for row in range(0, 1024, 100)])  # some windows' content tokens
    bounded = embed_model.bounded(recording, max_tokens=2048)(windows, spans)
    assert len(pooled_tokens) > 1 and max(pooled_tokens) <= 2048
    assert bounded.sentences.shape == (1024, 384)
    whole = pool(windows, spans)
    np.testing.assert_allclose(bounded.sentences, whole.sentences, atol=1e-5)
    np.testing.assert_allclose(bounded.span_means, whole.span_means, atol=1e-5)  # each span found in its own part
    assert embed_model.bounded(recording, max_tokens=4)(windows[:2]).sentences.shape == (2, 384)  # over the budget


def test_every_backend_a_config_can_name_is_registered():
    assert set(embed.BACKENDS) == set(get_args(embed_config.Backend)) - {"auto"}


CONVERT_AND_EMBED = """
import json, sys
from prisma_core.embed import EmbedConfig, embed_documents
from prisma_core.embed import openvino_backend
texts = json.loads(sys.argv[1])
embedded = embed_documents(texts, EmbedConfig(precision="fp32", backend="openvino"))
print(json.dumps({
    "conversions": openvino_backend.conversions,
    "vectors": embedded.vectors.tolist(),
    "chunk_ids": embedded.chunking.chunk_ids,
    "torch_weights_loaded": "sentence_transformers" in sys.modules,
    "torch_imported": "torch" in sys.modules,
}))
"""


CONVERT_COUNTING_FORKS = """
import json, os, sys
forks = []
os.register_at_fork(before=lambda: forks.append(1))
from prisma_core.embed import EmbedConfig, embed_documents, openvino_backend
embed_documents(["a short clinical note"], EmbedConfig(precision="fp32", backend="openvino"))
print(json.dumps({"forks": len(forks), "conversions": openvino_backend.conversions,
                  "telemetry_blocked": sys.modules.get("openvino_telemetry", "missing") is None}))
"""


def test_openvino_sends_no_usage_reports_and_never_forks_the_process(tmp_path):
    """openvino_telemetry reports usage from forked children on import and on every conversion, unless CI is set."""
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "TF_BUILD", "JENKINS_URL")}
    env |= {"PRISMA_CACHE_DIR": str(tmp_path), "HF_HUB_OFFLINE": "1", "HOME": str(tmp_path)}
    command = [sys.executable, "-c", CONVERT_COUNTING_FORKS]
    result = finish(
        subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    )
    assert result == {"forks": 0, "conversions": 1, "telemetry_blocked": True}


def embed_in_fresh_process(texts: list[str], cache_dir, wait: bool = True):
    env = os.environ | {"PRISMA_CACHE_DIR": str(cache_dir), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-c", CONVERT_AND_EMBED, json.dumps(texts)]
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return finish(process) if wait else process


def finish(process: subprocess.Popen) -> dict:
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err[-2000:]
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow  # three fresh processes, two of them convert
def test_converted_model_is_cached_on_disk_for_the_next_process(bbc, tmp_path):
    """Two processes converting at once both succeed and leave one complete folder; a third loads it without
    converting and embeds the same windows into the same vectors. Conversion runs in a child process, so no process
    that embeds imports torch or holds its copy of the model: their vectors are torch fp32's."""
    texts = [bbc["text"].iloc[0] * 3, *bbc["text"].iloc[1:4]]
    first, second = (embed_in_fresh_process(texts, tmp_path, wait=False) for _ in range(2))
    converted = [finish(first), finish(second)]
    loaded = embed_in_fresh_process(texts, tmp_path)
    assert sum(run["conversions"] for run in converted) >= 1
    assert loaded["conversions"] == 0
    for run in [*converted, loaded]:
        assert not run["torch_weights_loaded"] and not run["torch_imported"]
    reference = embed_texts(texts, EmbedConfig(precision="fp32", backend="torch"))
    assert cosines(np.array(converted[0]["vectors"]), reference).min() > 0.999
    folders = list((tmp_path / "openvino").iterdir())
    assert len(folders) == 1 and not folders[0].name.startswith(".")  # no half-written temporary folder is left
    assert loaded["chunk_ids"] == converted[0]["chunk_ids"]
    assert max(len(c) for c in loaded["chunk_ids"]) == 256  # the window survived the cache
    assert cosines(np.array(loaded["vectors"]), np.array(converted[0]["vectors"])).min() > 0.99999


def test_a_conversion_that_fails_in_its_child_process_says_why(tmp_path):
    with pytest.raises(EmbeddingError, match="Could not load the embedding model") as raised:
        openvino_backend._convert_in_child(str(tmp_path / "no-such-model"), tmp_path / "folder", "fp32")
    assert "Traceback" not in str(raised.value)
    assert not (tmp_path / "folder").exists()


def test_cache_key_names_model_precision_and_library_versions(monkeypatch, tmp_path):
    monkeypatch.setenv("PRISMA_CACHE_DIR", str(tmp_path))
    assert openvino_backend.cache_root() == tmp_path / "openvino"
    key = openvino_backend.cache_key(DEFAULT_MODEL, "bf16")
    assert key.startswith(f"{DEFAULT_MODEL}-bf16-")
    assert openvino_backend.cache_key(DEFAULT_MODEL, "fp32") != key
    with monkeypatch.context() as earlier:  # a folder of the single-output graph (format 3) is converted again
        earlier.setattr(openvino_cache, "CACHE_FORMAT", 3)
        assert openvino_backend.cache_key(DEFAULT_MODEL, "bf16") != key
    real_version = openvino_cache._package_version
    monkeypatch.setattr(
        openvino_cache, "_package_version", lambda name: "0.0" if name == "openvino" else real_version(name)
    )
    assert openvino_backend.cache_key(DEFAULT_MODEL, "bf16") != key


def test_label_texts_are_embedded_once_through_the_workspace_cache(tmp_path, monkeypatch):
    """Labels go through the documents' embedding cache (by text hash): asked again, nothing is embedded, and the
    vectors are the ones embed_texts gives. They belong to no dataset."""
    from prisma_core.embed import cache
    from prisma_core.store import Workspace

    embedded: list[list[str]] = []

    def recording(texts, config):  # the real embedding, recorded
        embedded.append(list(texts))
        return embed_texts(texts, config)

    monkeypatch.setattr(cache, "embed_texts", recording)
    workspace = Workspace(tmp_path / "ws")
    labels = ["football results", "general election", "football results"]
    first = cache.embed_cached(labels, FP32, workspace)
    again = cache.embed_cached([*labels, "film awards"], FP32, workspace)
    assert embedded == [["football results", "general election"], ["film awards"]]
    np.testing.assert_allclose(first, embed_texts(labels, FP32), atol=1e-6)
    np.testing.assert_array_equal(again[:3], first)
    assert workspace.datasets() == []
