"""Document embeddings by chunk-and-average (SPEC section 2).

Every document is tokenised whole; documents longer than the model window are split into contiguous windows of
``W_eff = L_max - N_special`` content tokens, each wrapped with the model's special tokens. All windows of all
documents are sorted by length and batched together, pooled by the model's own pooling module, and averaged per
document. When asked, the same forward passes also pool each window's passages (spans cut at sentence ends, `passages`)
from the model's token states: the document vectors stay exactly what they are without.

A backend (one module each, listed in BACKENDS) runs the model: its `load_encoder(config)` returns an EncoderSpec (the
model's tokenizer, window, dimension and pooling) and a Pooler, at the precision this package chose (`auto` resolved,
int8 included). `config` holds the settings, `model` the shared model loading, `chunking` the windows and the
averaging, `passages` how windows are cut into passages and passages pooled.
"""

from __future__ import annotations

import functools
import gc
import importlib
import importlib.util
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from prisma_core.embed.chunking import Chunking, average_by_document, encode_chunks, plan_chunks
from prisma_core.embed.config import (
    COSINE_FLOOR,
    DEFAULT_MODEL,
    EmbedConfig,
    cpu_has_int8_dot_product,
    cpu_has_native_bf16,
    resolve_device,
    resolve_precision,
)
from prisma_core.embed.model import (
    Encoder,
    EncoderSpec,
    Pooler,
    bounded,
    check_model_available,
    load_model,
    release_loaded_models,
)
from prisma_core.embed.passages import pooled_passages
from prisma_core.errors import EmbeddingError
from prisma_core.progress import ProgressCallback, ignore_progress
from prisma_core.store.schemas import Passages

__all__ = [
    "COSINE_FLOOR",
    "DEFAULT_MODEL",
    "Chunking",
    "EmbedConfig",
    "Embedded",
    "Encoder",
    "EncoderSpec",
    "Passages",
    "average_by_document",
    "backend_for",
    "cpu_has_int8_dot_product",
    "cpu_has_native_bf16",
    "embed_documents",
    "embed_texts",
    "load_encoder",
    "load_model",
    "model_key",
    "openvino_installed",
    "plan_chunks",
    "release_models",
    "resolve_backend",
    "resolve_config_precision",
    "resolve_device",
    "resolve_precision",
]

BACKENDS: dict[str, str] = {
    "torch": "prisma_core.embed.torch_backend",
    "openvino": "prisma_core.embed.openvino_backend",
}
"""Backend name -> its module, imported only when chosen (openvino is an optional package)."""


@functools.cache
def openvino_installed() -> bool:
    return importlib.util.find_spec("openvino") is not None


@functools.cache
def nncf_installed() -> bool:
    return importlib.util.find_spec("nncf") is not None


def resolve_config_precision(config: EmbedConfig) -> Literal["fp32", "bf16", "int8"]:
    """The precision `config` embeds at. auto: int8 on a CPU with int8 dot products when OpenVINO and NNCF are
    installed, the backend is not torch and the int8 model passed its accuracy check and was faster than fp32
    (both measured once per machine by embed/quantize.py, judged by embed/int8_choice.py); else what
    `resolve_precision` says (bf16 where it is native, else fp32)."""
    device = resolve_device(config.device)
    precision = resolve_precision(config.precision, device)
    int8_possible = device == "cpu" and config.backend != "torch" and cpu_has_int8_dot_product()
    if config.precision == "auto" and int8_possible and openvino_installed() and nncf_installed():
        from prisma_core.embed import int8_choice  # reads (or measures) the int8 check: only where int8 can be chosen

        return "int8" if int8_choice.auto_int8(config.model) else precision
    return precision


def resolve_backend(config: EmbedConfig) -> Literal["torch", "openvino"]:
    """auto: OpenVINO for int8, and for bf16 on a CPU, when it is installed; on a CPU without bf16, OpenVINO fp32 too
    for a model it builds without torch (the bundled one: 1.7x torch fp32's speed on an AVX2 CPU, 310 MB less memory,
    cosine 0.9999999; BENCHMARKS.md section 8). Explicit fp32, other models at fp32 and GPUs stay on torch."""
    return backend_for(config, resolve_config_precision(config))


def backend_for(config: EmbedConfig, precision: str) -> Literal["torch", "openvino"]:
    """`resolve_backend` for `config` embedding at `precision` (resolved: fp32, bf16 or int8)."""
    device = resolve_device(config.device)
    if config.backend == "openvino" or precision == "int8":
        if config.backend == "torch":
            raise EmbeddingError("int8 runs on the OpenVINO backend only: choose the auto or openvino backend.")
        if device != "cpu":
            raise EmbeddingError(f"The OpenVINO backend runs on the CPU only, not on {device!r}: choose torch.")
        if not openvino_installed():
            raise EmbeddingError("The OpenVINO backend needs the openvino package: pip install openvino")
        return "openvino"
    if config.backend != "auto" or device != "cpu" or not openvino_installed():
        return "torch"
    if precision == "bf16":
        return "openvino"
    return "openvino" if config.precision == "auto" and _builds_without_torch(config.model) else "torch"


@functools.cache
def _builds_without_torch(model: str) -> bool:
    from prisma_core.embed.openvino_graph import buildable

    return buildable(model) is not None


def release_models() -> None:
    """Drop the embedding models this process loaded: the bundled model compiled by OpenVINO holds about 200 MB, which
    a server would otherwise keep between jobs. The next embedding loads it again from the disk cache (0.7-0.8 s)."""
    release_loaded_models()
    openvino_backend = sys.modules.get(BACKENDS["openvino"])  # never imported here: only when it was loaded
    if openvino_backend is not None:
        openvino_backend.release_compiled_models()
    gc.collect()


def model_key(config: EmbedConfig) -> str:
    """Names the vector space: same key, same vectors (model, backend and precision actually used, normalisation)."""
    precision = resolve_config_precision(config)
    runtime = "openvino-" if resolve_backend(config) == "openvino" else ""
    suffix = "-norm" if config.normalize else ""
    return f"{config.model}|{runtime}{precision}{suffix}"


def load_encoder(config: EmbedConfig) -> tuple[EncoderSpec, Pooler]:
    """The model (tokenizer, window, dimension) and the pooler that runs it on the backend `config` resolves to.

    Only here are the backend and its libraries (torch, sentence-transformers, openvino) imported: a process that
    finds every vector it needs in the cache never loads them. A model that is not on this machine and cannot be
    downloaded is refused before any of them is imported."""
    check_model_available(config.model)
    backend = importlib.import_module(BACKENDS[resolve_backend(config)])
    return backend.load_encoder(replace(config, precision=resolve_config_precision(config)))


@dataclass(frozen=True)
class Embedded:
    vectors: np.ndarray  # [n_docs, d] float32
    chunking: Chunking
    passages: Passages | None = None
    """With `passages=True` and a model that pools by the mean of its tokens: every passage, `position` the index of
    its text in the texts given."""


def embed_documents(
    texts: Sequence[str],
    config: EmbedConfig = EmbedConfig(),
    progress: ProgressCallback = ignore_progress,
    passages: bool = False,
) -> Embedded:
    """Chunk-and-average embeddings with the chunking that produced them, and with `passages` the documents'
    passages, pooled in the same forward passes (None for a model that does not pool by the mean of its tokens: CLS
    pooling, a Dense layer). No caching here: the pipeline caches."""
    encoder, pool = load_encoder(config)
    passages = passages and encoder.pools_by_mean
    chunking = plan_chunks(encoder, texts, passages)
    chunk_vectors, passage_means = encode_chunks(
        bounded(pool), chunking.chunk_ids, encoder.dimension, config.batch_size, progress, chunking.passages
    )
    vectors = average_by_document(chunk_vectors, chunking.chunk_owner, len(texts))
    if config.normalize:
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    if chunking.passages is None:
        return Embedded(vectors, chunking)
    normalize = encoder.normalizes or config.normalize
    found = pooled_passages(chunking.passages, chunking.chunk_owner, passage_means, normalize)
    return Embedded(vectors, chunking, found)


def embed_texts(
    texts: Sequence[str], config: EmbedConfig = EmbedConfig(), progress: ProgressCallback = ignore_progress
) -> np.ndarray:
    """[n_docs, d] float32 chunk-and-average vectors."""
    return embed_documents(texts, config, progress).vectors
