"""Whether `auto` may embed a dataset with a faster, lower precision: only when, on a sample of that dataset's own
documents, every document's vector stays within COSINE_FLOOR of full precision (fp32).

The fast precision `auto` would pick on this machine (int8 where the CPU has int8 dot products and the int8 model
passed its first-use check on fixed texts, embed/int8_choice.py; bf16 where it is native) is only a candidate: a
model quantized on calibration sentences can still move some documents of a given collection far (one news article
landed at cosine 0.913 to fp32 on a CPU with AMX). Each candidate, fastest first, embeds the first window of up to
SAMPLE_DOCUMENTS documents, as fp32 does; the first whose every document stays at or above the floor is chosen,
else fp32. The choice says why, in words an analyst can read (`PrecisionChoice.reason`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from prisma_core.embed import (
    EmbedConfig,
    backend_for,
    cpu_has_native_bf16,
    embeds_elsewhere,
    load_encoder,
    release_models,
    resolve_config_precision,
    resolve_device,
)
from prisma_core.embed.chunking import encode_chunks, plan_chunks
from prisma_core.embed.config import COSINE_FLOOR
from prisma_core.embed.model import bounded
from prisma_core.embed.openvino_cache import cache_key, cache_root
from prisma_core.errors import EmbeddingError
from prisma_core.store.datasets import text_hash

SAMPLE_DOCUMENTS = 32
"""Documents of the dataset checked (their first window): a few seconds of embedding at both precisions."""


@dataclass(frozen=True)
class PrecisionChoice:
    """The backend and precision a dataset is embedded with, and why."""

    backend: str
    precision: str
    reason: str
    """A sentence, e.g. "int8 passed: lowest cosine to full precision 0.985 on 32 of this dataset's documents"."""
    lowest_cosine: float | None = None
    """The chosen precision's lowest cosine to fp32 on the sample; None when nothing was checked."""
    n_checked: int = 0

    def config(self, config: EmbedConfig) -> EmbedConfig:
        """`config` with this backend and precision (what embeds the dataset; its vector space is the same key
        `auto` would name for it)."""
        return replace(config, precision=self.precision, backend=self.backend)


def fast_candidates(config: EmbedConfig) -> list[str]:
    """The precisions faster than fp32 that `auto` may choose for `config` on this machine, fastest first; none for
    an explicit precision (it is used as asked) or where auto stays at fp32."""
    if config.precision != "auto":
        return []
    machine = resolve_config_precision(config)
    device = resolve_device(config.device)
    bf16_native = device == "cuda" or (device == "cpu" and cpu_has_native_bf16())
    return [p for p in ("int8", "bf16") if p == machine or (p == "bf16" and machine == "int8" and bf16_native)]


def at_precision(config: EmbedConfig, precision: str) -> EmbedConfig:
    """`config` at `precision` on the backend `auto` runs that precision on."""
    return replace(config, precision=precision, backend=backend_for(config, precision))  # type: ignore[arg-type]


def unchecked_choice(config: EmbedConfig) -> PrecisionChoice:
    """The choice where nothing needs checking: an explicit precision, or `auto` where it stays at fp32."""
    precision = resolve_config_precision(config)
    backend = backend_for(config, precision)
    if embeds_elsewhere(config):
        return PrecisionChoice(backend, precision, f"the {backend} server embeds at its own precision")
    if config.precision != "auto":
        return PrecisionChoice(backend, precision, f"{precision} as set in the embedding settings")
    return PrecisionChoice(backend, precision, f"{precision}: this computer has no faster precision to try")


def first_window_vectors(config: EmbedConfig, texts: Sequence[str]) -> np.ndarray:
    """[n, d] the sentence embedding of each text's first model window at `config`'s backend and precision."""
    encoder, pool = load_encoder(config)
    chunking = plan_chunks(encoder, texts)
    first = np.unique(chunking.chunk_owner, return_index=True)[1]
    windows = [chunking.chunk_ids[index] for index in first]
    vectors, _ = encode_chunks(bounded(pool), windows, encoder.dimension, config.batch_size)
    return vectors


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", a, b) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)).clip(min=1e-12)


def sample_positions(n_documents: int, size: int = SAMPLE_DOCUMENTS) -> np.ndarray:
    """Up to `size` positions spread evenly over `n_documents` (a dataset sorted by topic still shows each topic)."""
    return np.unique(np.linspace(0, n_documents - 1, min(size, n_documents)).round().astype(np.int64))


def faithful_choice(
    config: EmbedConfig,
    texts: Sequence[str],
    floor: float | None = None,
    candidates: Sequence[str] | None = None,
) -> PrecisionChoice:
    """The backend and precision to embed a dataset with, `texts` a sample of its documents (`sample_positions`): the
    first of `candidates` (by default `fast_candidates`: this machine's, fastest first) whose vectors of every text
    stay at or above `floor` (COSINE_FLOOR) cosine to fp32, else fp32."""
    floor = COSINE_FLOOR if floor is None else floor
    candidates = fast_candidates(config) if candidates is None else candidates
    if not candidates:
        return unchecked_choice(config)
    fp32 = at_precision(config, "fp32")
    if not texts:
        return PrecisionChoice(fp32.backend, "fp32", "fp32: the dataset has no document to check a faster precision on")
    try:
        return _first_faithful(config, texts, floor, candidates)
    finally:
        release_models()  # the fp32 reference (and the candidates) leave memory: the embedding loads what it uses


def _first_faithful(
    config: EmbedConfig, texts: Sequence[str], floor: float, candidates: Sequence[str]
) -> PrecisionChoice:
    fp32 = at_precision(config, "fp32")
    reference = first_window_vectors(fp32, texts)
    refused = []
    for precision in candidates:
        candidate = at_precision(config, precision)
        similarity = cosines(first_window_vectors(candidate, texts), reference)
        lowest = float(similarity.min())
        if lowest >= floor:
            checked = f"on {len(texts)} of this dataset's documents"
            passed = f"{precision} passed: lowest cosine to full precision {lowest:.4f} {checked}"
            return PrecisionChoice(candidate.backend, precision, "; ".join([*refused, passed]), lowest, len(texts))
        below = int((similarity < floor).sum())
        documents = "one document" if below == 1 else f"{below} of {len(texts)} documents"
        refused.append(f"{precision} refused: {documents} at {lowest:.4f} < {floor}")
    reason = "; ".join([*refused, "fp32 chosen"])
    return PrecisionChoice(fp32.backend, "fp32", reason, 1.0, len(texts))


def cached_choice(
    config: EmbedConfig, texts: Sequence[str], before_check: Callable[[], None] = lambda: None
) -> PrecisionChoice:
    """`faithful_choice`, kept on disk beside the converted models (and in this process) under everything it depends
    on: the candidates' and fp32's converted models (model files, library versions), the floor and the sampled texts.
    A dataset checked once is not checked again; nothing is checked where `auto` has no candidate, and fp32 is chosen
    where the model cannot be loaded to check (the embedding then says why). `before_check` is called before a check
    loads the models (seconds; on a fresh machine, their conversion)."""
    if not fast_candidates(config):
        return unchecked_choice(config)
    path = _choices_folder() / f"{_choice_digest(config, texts, COSINE_FLOOR)}.json"
    if path not in _choices:
        try:
            _choices[path] = PrecisionChoice(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            before_check()
            try:
                _choices[path] = faithful_choice(config, texts)
            except EmbeddingError as error:  # a model that cannot load: embedding it says why; nothing is kept
                fp32 = at_precision(config, "fp32")
                return PrecisionChoice(fp32.backend, "fp32", f"fp32: no faster precision could be checked ({error})")
            _keep(path, _choices[path])
    return _choices[path]


_choices: dict[Path, PrecisionChoice] = {}


def _choices_folder() -> Path:
    return cache_root().parent / "precision_checks"


def _choice_digest(config: EmbedConfig, texts: Sequence[str], floor: float) -> str:
    precisions = [*fast_candidates(config), "fp32"]
    described = {
        "models": [(p, at_precision(config, p).backend, cache_key(config.model, p)) for p in precisions],
        "device": resolve_device(config.device),
        "floor": floor,
        "sample": [text_hash(text) for text in texts],
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:24]


def _keep(path: Path, choice: PrecisionChoice) -> None:
    """Writes the choice under a temporary name, then renames it into place; a cache that cannot be written only
    costs the next process a check."""
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(json.dumps(asdict(choice)))
        temporary.replace(path)
    except OSError:
        temporary.unlink(missing_ok=True)
