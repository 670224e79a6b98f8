"""Document vectors a test workspace takes from the embedding cache instead of embedding them again: the shared
corpora's vectors (`../shared/corpora/<corpus>.vectors.parquet`, computed by Prisma with the bundled model), or
another workspace's cache. Only tests whose subject is not embedding use them; tests of embedding embed."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq

from bench import common
from prisma_core import pipeline
from prisma_core.embed import EmbedConfig, model_key
from prisma_core.store import Workspace

SHARED_SPACE = EmbedConfig(backend="openvino", precision="fp32")
"""The vector space of the shared corpora's vectors (their parquet's `model_key`), set explicitly: `auto` would choose
a precision for each dataset (int8 on a CPU with int8 dot products), another space with none of these vectors."""


def cache_vectors_from(source: Workspace, target: Workspace, dataset_id: str) -> None:
    """Copies into `target`'s embedding cache the vectors `source` holds for the texts of `target`'s dataset (the
    product's cache by text hash: `pipeline.embed_dataset` then computes none of them)."""
    key = model_key(EmbedConfig())
    hashes = target.documents(dataset_id, ["text_hash"])["text_hash"].unique().tolist()
    found = source.cached_vectors(key, hashes)
    if found:
        target.cache_text_vectors(key, list(found), np.stack(list(found.values())))


def embed_from_shared_vectors(workspace: Workspace, dataset_id: str, corpus: str) -> EmbedConfig:
    """Embeds the dataset, every document of it a text of the shared corpus `corpus`, from that corpus's vectors put
    in the workspace's embedding cache: nothing is computed, and the model is never loaded. Returns the embedding
    settings of that space (SHARED_SPACE), which every later stage on the dataset must be given.

    Fails, naming the documents, when a stored text's hash is not in the parquet (the corpus, or how Prisma hashes a
    text, changed): the test would otherwise embed them in silence, or read vectors of other texts."""
    path = common.CORPORA_DIR / f"{corpus}.vectors.parquet"
    shared = pq.read_table(path, columns=["text_hash"]).to_pandas()
    stored = workspace.documents(dataset_id, ["doc_id", "text_hash"])
    unknown = stored[~stored["text_hash"].isin(shared["text_hash"])]
    assert unknown.empty, (
        f"{len(unknown)} of {len(stored)} documents have no vector in {path} (their text hashes are not there; "
        f"doc ids {unknown['doc_id'].head(5).tolist()}): compute the vectors again, see ../shared/corpora/README.md"
    )
    config = common.cache_corpus_vectors(workspace, dataset_id, corpus)
    assert model_key(config) == model_key(SHARED_SPACE), (model_key(config), model_key(SHARED_SPACE))
    embedded = pipeline.embed_dataset(workspace, dataset_id, SHARED_SPACE)
    assert embedded.n_computed == 0 and embedded.n_documents == len(stored), embedded
    return SHARED_SPACE
