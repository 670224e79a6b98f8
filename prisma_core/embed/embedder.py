"""The one contract of every embedding backend, and the local models behind it.

An `Embedder` splits texts into the windows it reads (`windows`) and embeds windows (`embed`); chunk-and-average
(`prisma_core.embed.embed_documents`, with `chunking`) is the layer over it that any backend gets: windows batched
longest first, embedded, averaged per document. A model run here (torch, OpenVINO: `LocalEmbedder`) splits by its
tokenizer and can pool passages in the same forward passes; a server (Ollama) splits by words and gives one vector
per window. The backends are registered in `backends`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from prisma_core.embed.chunking import Chunking, plan_chunks
from prisma_core.embed.model import MAX_BATCH_TOKENS, EncoderSpec, Pooled, Pooler, bounded


class Embedder(Protocol):
    @property
    def dimension(self) -> int | None:
        """The vectors' length; None until known (a server's: from its first reply)."""
        ...

    @property
    def pools_by_mean(self) -> bool:
        """Whether it can pool passages from its windows' token states (`pool`): only a model run here can."""
        ...

    @property
    def normalizes(self) -> bool:
        """Whether its window vectors are L2-normalised."""
        ...

    def windows(self, texts: Sequence[str], passages: bool = False) -> Chunking:
        """Each text split into the contiguous windows it reads whole (and with `passages`, their passages)."""
        ...

    def embed(self, windows: Sequence[Any]) -> np.ndarray:
        """[n_windows, d] float32: one vector per window, in order."""
        ...


@dataclass(frozen=True)
class LocalEmbedder:
    """A model run on this machine by a backend (its tokenizer's windows, its pooler); `max_batch_tokens`: the most
    tokens one forward pass pools (more on a GPU: `model.gpu_batch_tokens`)."""

    spec: EncoderSpec
    pooler: Pooler
    max_batch_tokens: int = MAX_BATCH_TOKENS

    @property
    def dimension(self) -> int:
        return self.spec.dimension

    @property
    def pools_by_mean(self) -> bool:
        return self.spec.pools_by_mean

    @property
    def normalizes(self) -> bool:
        return self.spec.normalizes

    def windows(self, texts: Sequence[str], passages: bool = False) -> Chunking:
        return plan_chunks(self.spec, texts, passages)

    def embed(self, windows: Sequence[Any]) -> np.ndarray:
        return self.pool(list(windows)).sentences

    def pool(self, windows: list[list[int]], spans: np.ndarray | None = None) -> Pooled:
        """Window vectors and, for `spans`, the mean token state of each span, from the same forward pass."""
        return bounded(self.pooler, self.max_batch_tokens)(windows, spans)


def windows_per_batch(embedder: Embedder, batch_size: int) -> int:
    """Windows chunk-and-average hands the embedder at once: the batch size set, or where the embedder pools more
    tokens at once than a CPU (a GPU), as many full windows as those tokens hold."""
    if not isinstance(embedder, LocalEmbedder) or embedder.max_batch_tokens <= MAX_BATCH_TOKENS:
        return batch_size
    return max(batch_size, embedder.max_batch_tokens // (embedder.spec.max_seq_length or 512))


def pooler_of(embedder: Embedder) -> Pooler:
    """What chunk-and-average runs batches through: a local model's own pooler (passages pooled in the same forward
    passes), else the embedder's window vectors with no passage."""
    if isinstance(embedder, LocalEmbedder):
        return embedder.pool

    def pool(windows: list[Any], spans: np.ndarray | None = None) -> Pooled:
        vectors = embedder.embed(windows)
        return Pooled(vectors, np.zeros((0, vectors.shape[1]), np.float32))

    return pool
