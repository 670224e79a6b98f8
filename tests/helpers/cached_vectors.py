"""Document vectors a test workspace takes from another workspace's embedding cache instead of embedding them again."""

from __future__ import annotations

import numpy as np

from prisma_core.embed import EmbedConfig, model_key
from prisma_core.store import Workspace


def cache_vectors_from(source: Workspace, target: Workspace, dataset_id: str) -> None:
    """Copies into `target`'s embedding cache the vectors `source` holds for the texts of `target`'s dataset (the
    product's cache by text hash: `pipeline.embed_dataset` then computes none of them)."""
    key = model_key(EmbedConfig())
    hashes = target.documents(dataset_id, ["text_hash"])["text_hash"].unique().tolist()
    found = source.cached_vectors(key, hashes)
    if found:
        target.cache_text_vectors(key, list(found), np.stack(list(found.values())))
