"""Short texts (labels, keyword candidates) embedded through the workspace's embedding cache, the one documents use:
keyed by the embedding space and the text's hash, so labels scored again embed nothing and load no model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from prisma_core.embed import EmbedConfig, embed_texts, model_key
from prisma_core.store.datasets import text_hash


class VectorCache(Protocol):
    """What the workspace offers (`store.vectors.Vectors`)."""

    def cached_vectors(self, embedding_key: str, hashes: Sequence[str]) -> dict[str, np.ndarray]: ...

    def cache_text_vectors(self, embedding_key: str, hashes: Sequence[str], vectors: np.ndarray) -> None: ...


def embed_cached(texts: Sequence[str], config: EmbedConfig, cache: VectorCache | None = None) -> np.ndarray:
    """[n_texts, d] float32 chunk-and-average vectors, the same `embed_texts` gives; with a cache, only texts it
    lacks are embedded (and then added to it). Without one, everything is embedded."""
    if cache is None or not texts:
        return embed_texts(texts, config)
    key = model_key(config)
    hashes = [text_hash(text) for text in texts]
    found = cache.cached_vectors(key, hashes)
    missing = {h: text for h, text in zip(hashes, texts, strict=True) if h not in found}
    if missing:
        vectors = embed_texts(list(missing.values()), config)
        cache.cache_text_vectors(key, list(missing), vectors)
        found.update(zip(missing, vectors, strict=True))
    return np.stack([found[h] for h in hashes]).astype(np.float32)
