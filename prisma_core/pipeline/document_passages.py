"""The passages of a dataset's documents (`prisma_core.embed.passages`: spans cut at sentence ends inside one model
window, each with a vector in the documents' space), the one way the app and the command line read them.

Embedding stores them (pipeline/dataset.py). A document without stored passages (embedded before passages existed,
on a Ray cluster, past the cap of `passage_cap`, or whose vector came from elsewhere) gets them computed here with
the model, through the same code, and stored while the dataset is within the cap. `passages_of_texts` gives the
passages of any texts (a text typed in), storing nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from prisma_core.embed import EmbedConfig, embed_documents, model_key
from prisma_core.embed.passages import concatenated_ranges
from prisma_core.errors import EmbeddingError, NotFoundError
from prisma_core.pipeline.dataset import SLICE_DOCUMENTS, WINDOW_DOCUMENTS
from prisma_core.pipeline.embedding_choice import dataset_config
from prisma_core.pipeline.passage_cap import PassageCap
from prisma_core.progress import Progress, ProgressCallback, ignore_progress
from prisma_core.store import Passages, Workspace
from prisma_core.store.schemas import concatenate_passages

NOT_BY_MEAN = (
    "The embedding model {model!r} does not make its document vectors as the mean of its token vectors (it pools "
    "another way: its first token, or a Dense layer after the mean), so its passages cannot have vectors of their own. "
    "Choose a model with mean pooling, like the bundled all-MiniLM-L6-v2."
)


def passages(
    workspace: Workspace,
    dataset_id: str,
    positions: Sequence[int] | np.ndarray | None = None,
    config: EmbedConfig = EmbedConfig(),
    progress: ProgressCallback = ignore_progress,
) -> Passages:
    """The passages of the dataset's documents at `positions` (every document when None; each once), in the vector
    space of `config`, ordered by position, then passage number: read where stored, else computed (and stored within
    the cap). Memory holds every passage returned (about 1.5 KB each at 384 dimensions): `passage_batches` reads a
    large dataset's a window of documents at a time."""
    found = concatenate_passages(list(passage_batches(workspace, dataset_id, positions, config, progress)), 0)
    return found.take(np.lexsort((found.number, found.position)))


def passage_batches(
    workspace: Workspace,
    dataset_id: str,
    positions: Sequence[int] | np.ndarray | None = None,
    config: EmbedConfig = EmbedConfig(),
    progress: ProgressCallback = ignore_progress,
) -> Iterator[Passages]:
    """`passages`, WINDOW_DOCUMENTS documents at a time: each batch ordered by position, then passage number; the
    batches in position order when `positions` are given, else in the order the documents are stored."""
    config = dataset_config(workspace, dataset_id, config)
    key = model_key(config)
    n_documents = workspace.dataset(dataset_id).n_documents
    wanted = _checked(positions, n_documents)
    total = n_documents if wanted is None else len(wanted)
    cap = PassageCap(workspace, dataset_id, key)
    done = 0
    progress(Progress("passages", 0, total, f"0 of {total:,} documents"))
    for documents in _documents(workspace, dataset_id, wanted):
        found = _passages_of_documents(workspace, dataset_id, config, cap, documents)
        done += len(documents)
        progress(Progress("passages", done, total, f"{done:,} of {total:,} documents"))
        yield found.take(np.lexsort((found.number, found.position)))


def stored_passages(workspace: Workspace, dataset_id: str, embedding_key: str, dim: int) -> Passages:
    """The passages stored for the dataset's documents in this vector space, none computed (training reads these:
    documents without stored passages train as themselves alone), ordered by position, then passage number."""
    parts = []
    for documents in _documents(workspace, dataset_id, None):
        hashes = documents["text_hash"].unique().tolist()
        parts.append(_at_positions(workspace.passages.cached(embedding_key, hashes), hashes, documents))
    found = concatenate_passages(parts, dim)
    return found.take(np.lexsort((found.number, found.position)))


def passages_of_texts(texts: Sequence[str], config: EmbedConfig = EmbedConfig()) -> Passages:
    """The passages of these texts, `position` the index of each passage's text in `texts`; nothing is stored."""
    return _embedded_passages(texts, config)


def _checked(positions: Sequence[int] | np.ndarray | None, n_documents: int) -> np.ndarray | None:
    if positions is None:
        return None
    wanted = np.unique(np.asarray(positions, dtype=np.int64))
    outside = wanted[(wanted < 0) | (wanted >= n_documents)]
    if len(outside):
        raise NotFoundError(f"The dataset has no document at position {int(outside[0])} (it has {n_documents:,}).")
    return wanted


def _documents(workspace: Workspace, dataset_id: str, wanted: np.ndarray | None) -> Iterator[pd.DataFrame]:
    """(position, text_hash) of the wanted documents, WINDOW_DOCUMENTS at a time: every document in one scan."""
    columns = ["position", "text_hash"]
    if wanted is None:
        yield from workspace.document_batches(dataset_id, columns, WINDOW_DOCUMENTS)
        return
    for start in range(0, len(wanted), WINDOW_DOCUMENTS):
        yield workspace.documents_at(dataset_id, wanted[start : start + WINDOW_DOCUMENTS], columns)


def _passages_of_documents(
    workspace: Workspace, dataset_id: str, config: EmbedConfig, cap: PassageCap, documents: pd.DataFrame
) -> Passages:
    """The passages of these documents (position, text_hash): each text's stored passages, the rest computed."""
    hashes = documents["text_hash"].unique().tolist()
    found = workspace.passages.cached(cap.embedding_key, hashes)
    has_passages = np.zeros(len(hashes), dtype=bool)
    has_passages[found.position] = True
    if not has_passages.all():
        missing = np.flatnonzero(~has_passages)
        computed = _computed(workspace, dataset_id, config, cap, documents, [hashes[i] for i in missing])
        found = concatenate_passages([found, replace(computed, position=missing[computed.position])], 0)
        found = found.take(np.lexsort((found.number, found.position)))
    return _at_positions(found, hashes, documents)


def _at_positions(found: Passages, hashes: list[str], documents: pd.DataFrame) -> Passages:
    """Passages `found` of the texts `hashes` (`position` the index in `hashes`, ordered by it) as the passages of
    these documents (position, text_hash): a text two documents share gives its passages to both."""
    text = pd.Index(hashes).get_indexer(documents["text_hash"])
    first = np.searchsorted(found.position, text)
    counts = np.searchsorted(found.position, text, side="right") - first
    return replace(
        found.take(concatenated_ranges(first, counts)),
        position=np.repeat(documents["position"].to_numpy(np.int64), counts),
    )


def _computed(
    workspace: Workspace,
    dataset_id: str,
    config: EmbedConfig,
    cap: PassageCap,
    documents: pd.DataFrame,
    missing: list[str],
) -> Passages:
    """The passages of the texts `missing` (hashes of these documents), computed a slice at a time and stored within
    the cap; `position` the index of each passage's text in `missing`."""
    first_of_text = documents.drop_duplicates("text_hash").set_index("text_hash")["position"]
    parts = []
    for start in range(0, len(missing), SLICE_DOCUMENTS):
        hashes = missing[start : start + SLICE_DOCUMENTS]
        texts = workspace.documents_at(dataset_id, first_of_text[hashes].to_numpy(), ["position", "text"])["text"]
        computed = _embedded_passages(texts.tolist(), config)
        cap.store(hashes, computed)
        parts.append(replace(computed, position=computed.position + start))
    return concatenate_passages(parts, 0)


def _embedded_passages(texts: Sequence[str], config: EmbedConfig) -> Passages:
    embedded = embed_documents(texts, config, passages=True)
    if embedded.passages is None:
        raise EmbeddingError(NOT_BY_MEAN.format(model=config.model))
    return embedded.passages
