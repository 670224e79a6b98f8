"""Document embeddings by chunk-and-average (SPEC section 2).

Every document is tokenised whole; documents longer than the model window are split into contiguous windows of
``W_eff = L_max - N_special`` content tokens, each wrapped with the model's special tokens. All windows of all
documents are sorted by length and batched together, pooled by the model's own pooling module, and averaged per
document. When asked, the same forward passes also pool each window's passages (spans cut at sentence ends, `passages`)
from the model's token states: the document vectors stay exactly what they are without.

A backend (one module each, registered once in `backends.BACKENDS`) builds an `Embedder` (embed/embedder.py) with its
`load_embedder(config)`: a model run here (torch, OpenVINO) at the precision this package chose (`auto` resolved,
int8 included), or a server that embeds (Ollama). Chunk-and-average is the layer over any of them. `config` holds the
settings, `model` the shared model loading, `chunking` the windows and the averaging, `passages` how windows are cut
into passages and passages pooled.
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

from prisma_core.embed.backends import BACKENDS
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
from prisma_core.embed.embedder import Embedder, LocalEmbedder, pooler_of, windows_per_batch
from prisma_core.embed.model import (
    Encoder,
    EncoderSpec,
    Pooler,
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
    "Embedder",
    "Encoder",
    "EncoderSpec",
    "Passages",
    "average_by_document",
    "backend_for",
    "cpu_has_int8_dot_product",
    "cpu_has_native_bf16",
    "embed_documents",
    "embed_texts",
    "embeds_elsewhere",
    "load_embedder",
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


@functools.cache
def openvino_installed() -> bool:
    return importlib.util.find_spec("openvino") is not None


@functools.cache
def nncf_installed() -> bool:
    return importlib.util.find_spec("nncf") is not None


def resolve_config_precision(config: EmbedConfig) -> Literal["fp32", "bf16", "int8"]:
    """The precision `config` embeds at. auto: int8 on a CPU with int8 dot products when OpenVINO and NNCF are
    installed, the backend is not torch and the int8 model passed its accuracy check and was faster than bf16 where
    bf16 is native, else than fp32 (both measured once per machine by embed/quantize.py, judged by
    embed/int8_choice.py); else what `resolve_precision` says (bf16 where it is native, else fp32)."""
    if embeds_elsewhere(config):
        return "fp32"  # nothing to choose here: the server embeds as it does
    device = resolve_device(config.device)
    precision = resolve_precision(config.precision, device)
    int8_possible = device == "cpu" and config.backend != "torch" and cpu_has_int8_dot_product()
    if config.precision == "auto" and int8_possible and openvino_installed() and nncf_installed():
        from prisma_core.embed import int8_choice  # reads (or measures) the int8 check: only where int8 can be chosen

        return "int8" if int8_choice.auto_int8(config.model) else precision
    return precision


def resolve_backend(config: EmbedConfig) -> str:
    """auto: OpenVINO for int8, and for bf16 on a CPU, when it is installed; on a CPU without bf16, OpenVINO fp32 too
    for a model it builds without torch (the bundled one: 1.7x torch fp32's speed on an AVX2 CPU, 310 MB less memory,
    cosine 0.9999999; BENCHMARKS.md section 8). Explicit fp32, other models at fp32 and GPUs stay on torch. A backend
    that embeds on a server (Ollama) as named."""
    return backend_for(config, resolve_config_precision(config))


def embeds_elsewhere(config: EmbedConfig) -> bool:
    """Whether `config` names a backend that embeds on a server (Ollama): no device, precision or model here."""
    backend = BACKENDS.get(config.backend)
    return backend is not None and not backend.runs_here


def backend_for(config: EmbedConfig, precision: str) -> str:
    """`resolve_backend` for `config` embedding at `precision` (resolved: fp32, bf16 or int8)."""
    if embeds_elsewhere(config):
        return config.backend
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
    openvino_backend = sys.modules.get(BACKENDS["openvino"].module)  # never imported here: only when it was loaded
    if openvino_backend is not None:
        openvino_backend.release_compiled_models()
    gc.collect()


def model_key(config: EmbedConfig) -> str:
    """Names the vector space: same key, same vectors (model, backend and precision actually used, normalisation);
    a server's (Ollama: "model|ollama") has no precision of ours."""
    backend = BACKENDS[resolve_backend(config)]
    suffix = "-norm" if config.normalize else ""
    if not backend.runs_here:
        return f"{config.model}|{backend.space_tag}{suffix}"
    return f"{config.model}|{backend.space_tag}{resolve_config_precision(config)}{suffix}"


def load_encoder(config: EmbedConfig) -> tuple[EncoderSpec, Pooler]:
    """The model (tokenizer, window, dimension) and the pooler that runs it on the backend `config` resolves to (a
    backend that runs a model here; EmbeddingError for a server's).

    Only here are the backend and its libraries (torch, sentence-transformers, openvino) imported: a process that
    finds every vector it needs in the cache never loads them. A model that is not on this machine and cannot be
    downloaded is refused before any of them is imported."""
    embedder = load_embedder(config)
    if not isinstance(embedder, LocalEmbedder):
        raise EmbeddingError(f"The {config.backend} backend embeds on a server: it has no tokenizer or model here.")
    return embedder.spec, embedder.pooler


def load_embedder(config: EmbedConfig) -> Embedder:
    """The Embedder of the backend `config` resolves to (`backends.BACKENDS`), imported only now: a process that
    finds every vector it needs in the cache imports none. A model to run here that is not on this machine and
    cannot be downloaded is refused before any library is imported."""
    backend = BACKENDS[resolve_backend(config)]
    if backend.runs_here:
        check_model_available(config.model)
    module = importlib.import_module(backend.module)
    return module.load_embedder(replace(config, precision=resolve_config_precision(config)))


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
    embedder = load_embedder(config)
    passages = passages and embedder.pools_by_mean
    chunking = embedder.windows(texts, passages)
    chunk_vectors, passage_means = encode_chunks(
        pooler_of(embedder),
        chunking.chunk_ids,
        embedder.dimension,
        windows_per_batch(embedder, config.batch_size),
        progress,
        chunking.passages,
    )
    vectors = average_by_document(chunk_vectors, chunking.chunk_owner, len(texts))
    if config.normalize:
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    if chunking.passages is None:
        return Embedded(vectors, chunking)
    normalize = embedder.normalizes or config.normalize
    found = pooled_passages(chunking.passages, chunking.chunk_owner, passage_means, normalize)
    return Embedded(vectors, chunking, found)


def embed_texts(
    texts: Sequence[str], config: EmbedConfig = EmbedConfig(), progress: ProgressCallback = ignore_progress
) -> np.ndarray:
    """[n_docs, d] float32 chunk-and-average vectors."""
    return embed_documents(texts, config, progress).vectors
