"""The one place a labeller is built from the settings: the labelling jobs (`label_run`, `label_groups`,
`label_scope`, `score_run`'s detection) are given one and never build their own, so any `Labeller` can label.

- `ollama_labeller`: a chat model on an Ollama server (`OllamaConfig`); it holds a connection: use it in `with`.
- `keyword_labeller`: the words a corpus's units share and the rest of it lacks (`KeywordConfig`), on the corpus's
  texts and vectors; `run_keyword_labeller` builds it for a stored run, as the run was trained.
- `open_labeller`: the one the settings name, for the page and the command line.
"""

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from prisma_core.embed import EmbedConfig
from prisma_core.interpret.keyword_labeller import KeywordLabeller
from prisma_core.interpret.keywords import KeywordConfig, TextBatches, text_batches
from prisma_core.interpret.labeller import Labeller
from prisma_core.interpret.ollama_config import OllamaConfig
from prisma_core.interpret.ollama_labeller import OllamaLabeller
from prisma_core.reading.runs import LoadedRun
from prisma_core.store import Workspace
from prisma_core.store.vectors import DocumentVectors


def ollama_labeller(config: OllamaConfig) -> OllamaLabeller:
    """A labeller (and detector) asking `config.model` on `config.host`; close it (`with`) when done."""
    return OllamaLabeller(config)


def keyword_labeller(
    workspace: Workspace, dataset_id: str, vectors: DocumentVectors, embed: EmbedConfig, keywords: KeywordConfig
) -> KeywordLabeller:
    """Keyword labels on the dataset's corpus: its texts in memory when its vectors are, else scanned in batches."""
    return KeywordLabeller(workspace, corpus_texts(workspace, dataset_id, vectors), vectors, embed, keywords)


def run_keyword_labeller(workspace: Workspace, run: LoadedRun) -> KeywordLabeller:
    """Keyword labels for a stored run, with its embedding and keyword settings; its vectors read a slice at a time."""
    record = run.record
    vectors = workspace.stored_vectors(record.dataset_id, record.embedding_key)
    return keyword_labeller(workspace, record.dataset_id, vectors, run.settings.embed, run.settings.keywords)


@contextmanager
def open_labeller(workspace: Workspace, run: LoadedRun, ollama: OllamaConfig | None) -> Iterator[Labeller]:
    """The labeller the settings name: the Ollama model of `ollama` when given (its connection closed at the end),
    else the run's keywords."""
    if ollama is None:
        yield run_keyword_labeller(workspace, run)
        return
    with ollama_labeller(ollama) as labeller:
        yield labeller


def corpus_texts(workspace: Workspace, dataset_id: str, vectors: DocumentVectors) -> list[str] | TextBatches:
    """The dataset's texts in position order when its vectors are in memory, else a scan of them in batches."""
    if isinstance(vectors, np.ndarray):
        return workspace.documents(dataset_id, ["position", "text"])["text"].tolist()
    return text_batches(workspace, dataset_id)
