"""int8 embedding (embed/quantize.py, embed/int8_choice.py): accuracy on real texts, the quantized model cached on
disk, `auto` choosing int8 only when its accuracy check passes, and separate keys per precision. The real model is
quantized once, into a cache folder of this module's own."""

import dataclasses
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from prisma_core import pipeline
from prisma_core.embed import (
    COSINE_FLOOR,
    DEFAULT_MODEL,
    EmbedConfig,
    cpu_has_int8_dot_product,
    cpu_has_native_bf16,
    embed_documents,
    embed_texts,
    int8_choice,
    model_key,
    openvino_backend,
    openvino_cache,
    openvino_runtime,
    plan_chunks,
    quantize,
    resolve_backend,
)
from prisma_core.embed.calibration_texts import SENTENCES
from prisma_core.errors import EmbeddingError
from prisma_core.store import Workspace

INT8 = EmbedConfig(precision="int8")
FP32 = EmbedConfig(precision="fp32", backend="openvino")
PRECISIONS = ("fp32", "bf16", "int8")


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", a, b) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.fixture(scope="module")
def int8_cache(tmp_path_factory: pytest.TempPathFactory):
    """A fresh converted-model cache in which the int8 model is quantized (and checked) once for the module."""
    folder = tmp_path_factory.mktemp("openvino_cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(openvino_cache.CACHE_ENV, str(folder))
        openvino_backend._compiled.cache_clear()
        before = openvino_backend.conversions
        embed_texts(["a first sentence to embed at int8"], INT8)
        assert openvino_backend.conversions == before + 1  # converted and quantized by a child process
        yield folder
    openvino_backend._compiled.cache_clear()


def test_calibration_and_check_texts_are_separate_and_reach_past_one_window(int8_cache):
    calibration, check = quantize.calibration_documents(), quantize.check_documents()
    assert len(SENTENCES) >= 200
    assert not set(SENTENCES[::2]) & set(SENTENCES[1::2])
    assert not set(calibration) & set(check)
    encoder, _ = openvino_backend.load_encoder(INT8)
    for documents in (calibration, check):  # multi-window documents are calibrated and checked too
        assert plan_chunks(encoder, documents).chunks_per_doc.max() >= 2


def test_int8_vectors_stay_close_to_fp32_on_real_texts(int8_cache, bbc, mtsamples, ag_news):
    texts = bbc["text"].head(30).tolist() + mtsamples["text"].head(20).tolist() + ag_news["text"].head(30).tolist()
    int8, fp32 = embed_texts(texts, INT8), embed_texts(texts, FP32)
    similarity = cosines(int8, fp32)
    assert similarity.mean() >= int8_choice.MIN_MEAN_COSINE
    assert similarity.min() >= COSINE_FLOOR  # the floor `auto` holds every dataset to (embed/faithful.py)
    assert similarity.mean() < 0.9999  # really quantized, not fp32 under another name


def test_int8_passages_stay_close_to_fp32_and_the_check_compares_document_vectors(int8_cache, bbc):
    """NNCF keeps the graph's second output (the token embeddings passages are pooled from); the int8 check still
    measures the pooled document vectors."""
    compiled, encoder = openvino_backend._compiled(DEFAULT_MODEL, "int8")
    assert len(compiled.outputs) == 2
    texts = bbc["text"].head(6).tolist()
    int8, fp32 = embed_documents(texts, INT8, passages=True), embed_documents(texts, FP32, passages=True)
    assert int8.passages.start.tolist() == fp32.passages.start.tolist()
    similarity = cosines(int8.passages.vectors, fp32.passages.vectors)
    assert similarity.mean() >= int8_choice.MIN_MEAN_COSINE and similarity.min() >= 0.95
    checked = quantize.document_vectors(encoder, openvino_runtime.openvino_pooler(compiled, encoder.tokenizer), texts)
    assert cosines(checked, int8.vectors).min() >= 0.9999  # the same vectors, batched a little differently


def test_second_load_reads_the_quantized_model_without_quantizing_again(int8_cache):
    folder = int8_choice.check_folder(DEFAULT_MODEL)
    written = {name: (folder / name).stat().st_mtime_ns for name in ("model.xml", quantize.CHECK_FILE)}
    first = embed_texts(["the patient was discharged home"], INT8)
    quantized = openvino_backend.conversions
    openvino_backend._compiled.cache_clear()  # as a new process: nothing compiled in memory
    again = embed_texts(["the patient was discharged home"], INT8)
    assert openvino_backend.conversions == quantized
    assert {name: (folder / name).stat().st_mtime_ns for name in written} == written
    np.testing.assert_allclose(again, first, atol=1e-6)


def test_the_stored_check_measured_the_bundled_documents(int8_cache):
    check = int8_choice.int8_check(DEFAULT_MODEL)
    assert check is not None
    assert check.documents == len(quantize.check_documents())
    assert int8_choice.MIN_MEAN_COSINE <= check.mean_cosine < 1
    assert int8_choice.MIN_COSINE <= check.min_cosine <= check.mean_cosine
    assert check.int8_seconds > 0 and check.replaced_seconds > 0  # both timed on this machine ...
    assert check.replaced == ("bf16" if cpu_has_native_bf16() else "fp32")  # ... against what int8 replaces here


def test_auto_uses_int8_only_when_the_check_passes(int8_cache, monkeypatch, caplog):
    float_space = f"{DEFAULT_MODEL}|openvino-{'bf16' if cpu_has_native_bf16() else 'fp32'}"
    check = int8_choice.int8_check(DEFAULT_MODEL)
    if cpu_has_int8_dot_product():  # int8 where it is accurate and measured faster than bf16 or fp32 on this CPU
        faster = check.int8_seconds < check.replaced_seconds
        assert model_key(EmbedConfig()) == (f"{DEFAULT_MODEL}|openvino-int8" if faster else float_space)
    slower = dataclasses.replace(check, int8_seconds=check.replaced_seconds)
    failure = slower.failure(int8_choice.MIN_MEAN_COSINE, int8_choice.MIN_COSINE)
    assert "not faster" in failure and f"{check.replaced} {check.replaced_seconds:.2f} s" in failure
    faster = dataclasses.replace(check, int8_seconds=check.replaced_seconds / 2)
    assert faster.failure(check.mean_cosine, check.min_cosine) is None
    assert not int8_choice.auto_int8(DEFAULT_MODEL, min_mean_cosine=check.mean_cosine + 1e-4)
    assert not int8_choice.auto_int8(DEFAULT_MODEL, min_cosine=check.min_cosine + 1e-4)
    if check.int8_seconds < check.replaced_seconds:
        assert int8_choice.auto_int8(DEFAULT_MODEL, min_mean_cosine=check.mean_cosine, min_cosine=check.min_cosine)
    monkeypatch.setattr(int8_choice, "MIN_MEAN_COSINE", check.mean_cosine + 1e-4)
    with caplog.at_level(logging.WARNING, logger=int8_choice.__name__):
        assert model_key(EmbedConfig()) == float_space
    if cpu_has_int8_dot_product():
        assert "int8 embedding not used" in caplog.text
        assert f"mean cosine to fp32 {check.mean_cosine:.4f}" in caplog.text
    assert model_key(EmbedConfig(precision="int8")) == f"{DEFAULT_MODEL}|openvino-int8"  # asked for: always int8


def test_the_sensitive_operations_stay_in_floating_point(int8_cache):
    """The first FLOAT_DOWN_PROJECTIONS feed-forward down-projections (the MatMuls after each GELU) and the final
    normalisation are not quantized, the later down-projections are (quantize.py: the tail of documents far from
    fp32)."""
    model = openvino_runtime.openvino.Core().read_model(int8_choice.check_folder(DEFAULT_MODEL) / "model.xml")
    operations = model.get_ordered_ops()

    def quantized_down_projection(gelu) -> bool:  # whether a FakeQuantize lies between the GELU and its MatMul
        passed = []
        while gelu.get_type_name() != "MatMul":
            gelu = next(iter(gelu.output(0).get_target_inputs())).get_node()
            passed.append(gelu.get_type_name())
        return "FakeQuantize" in passed

    down = [quantized_down_projection(op) for op in operations if op.get_type_name() == "Gelu"]
    assert down == [False] * quantize.FLOAT_DOWN_PROJECTIONS + [True] * (len(down) - quantize.FLOAT_DOWN_PROJECTIONS)
    (normalize,) = (op for op in operations if op.get_type_name() == "NormalizeL2")
    assert normalize.input_value(0).get_node().get_type_name() != "FakeQuantize"


def test_keys_differ_per_precision_and_int8_needs_openvino(int8_cache, monkeypatch):
    folders = {precision: openvino_cache.cache_key(DEFAULT_MODEL, precision) for precision in ("fp32", "bf16", "int8")}
    assert len(set(folders.values())) == 3
    assert folders["int8"].startswith("all-MiniLM-L6-v2-int8-")
    monkeypatch.setattr(openvino_cache, "QUANTIZATION_RECIPE", quantize.QUANTIZATION_RECIPE - 1)
    assert openvino_cache.cache_key(DEFAULT_MODEL, "int8") != folders["int8"]  # quantized another way: again
    assert openvino_cache.cache_key(DEFAULT_MODEL, "bf16") == folders["bf16"]
    assert resolve_backend(INT8) == "openvino"
    with pytest.raises(EmbeddingError, match="OpenVINO backend only"):
        resolve_backend(EmbedConfig(precision="int8", backend="torch"))


def test_workspace_keeps_int8_and_bf16_vectors_apart(int8_cache, tmp_path: Path, bbc):
    workspace = Workspace(tmp_path / "workspace")
    documents = pd.DataFrame({"doc_id": bbc["id"].head(8).astype(str), "text": bbc["text"].head(8)})
    dataset_id = workspace.add_dataset("bbc", documents, ["bbc"], {})
    bf16 = EmbedConfig(precision="bf16", backend="openvino")
    first = pipeline.embed_dataset(workspace, dataset_id, INT8)
    second = pipeline.embed_dataset(workspace, dataset_id, bf16)
    assert (first.n_computed, second.n_computed) == (8, 8)  # nothing of the other precision was reused
    int8_vectors = workspace.vectors(dataset_id, model_key(INT8))
    bf16_vectors = workspace.vectors(dataset_id, model_key(bf16))
    assert not np.allclose(int8_vectors, bf16_vectors, atol=1e-4)
    assert cosines(int8_vectors, bf16_vectors).min() >= COSINE_FLOOR
    assert pipeline.embed_dataset(workspace, dataset_id, INT8).n_computed == 0


def test_a_model_that_cannot_load_is_not_quantized_and_auto_stays_in_floating_point():
    space = model_key(EmbedConfig(model="/nonexistent/prisma-model"))
    assert space.startswith("/nonexistent/prisma-model|") and not space.endswith("int8")
    with pytest.raises(EmbeddingError, match="'/nonexistent/prisma-model' is neither a folder here nor a model id"):
        embed_texts(["a text"], EmbedConfig(model="/nonexistent/prisma-model"))
