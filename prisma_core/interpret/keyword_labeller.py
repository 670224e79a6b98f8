"""Keyword labels (`keywords.keyword_labels`) for any group of documents of one corpus, behind the `Labeller`
contract: training names every feature, theme and family with it, many units at once so their labels differ."""

import functools
from dataclasses import asdict, replace
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from prisma_core.embed import EmbedConfig
from prisma_core.embed.cache import embed_cached
from prisma_core.interpret.keywords import (
    KEYWORD_SOURCE,
    CorpusTerms,
    KeywordConfig,
    TextBatches,
    corpus_terms,
    keyword_labels,
    streamed_corpus_terms,
)
from prisma_core.interpret.label_scores import LABEL_BATCH_SIZE
from prisma_core.interpret.labeller import LabelRequest, LabelResult
from prisma_core.store import Workspace
from prisma_core.store.vectors import DocumentVectors

KEYWORD_VERSION = ""
"""The prompt version keyword labels are stored with: they come from no prompt."""


class KeywordLabeller:
    """Keyword labels on one corpus: its vocabulary is counted once, on first use; candidate terms seen before are
    embedded from the cache."""

    source = KEYWORD_SOURCE
    version = KEYWORD_VERSION
    host = ""  # this computer

    def __init__(
        self,
        workspace: Workspace,
        texts: list[str] | TextBatches,
        vectors: DocumentVectors,
        embed_config: EmbedConfig,
        config: KeywordConfig,
    ) -> None:
        """texts: the corpus in position order, in memory or scanned in batches; vectors: its document vectors."""
        self.workspace, self.texts, self.vectors, self.config = workspace, texts, vectors, config
        self.embed_config = replace(embed_config, batch_size=max(embed_config.batch_size, LABEL_BATCH_SIZE))

    @property
    def n_shown(self) -> tuple[int, int]:
        """A unit's evidence: its n_top_documents strongest documents; keywords need no contrast documents (the
        whole corpus is their contrast)."""
        return self.config.n_top_documents, 0

    def check(self) -> None:
        """Keywords need no server: they can always label."""

    def record(self) -> dict[str, Any]:
        return {"keywords": asdict(self.config)}

    def label_units(self, members: sp.spmatrix) -> pd.DataFrame:
        """members: [n_units, n_documents] 0/1 -> unit, label, description, source; no two units share a label."""
        return keyword_labels(self.terms, members, self.vectors, self.embed, self.config)

    def label(self, request: LabelRequest) -> LabelResult:
        """One unit, named from its evidence documents (by position: their texts are not needed)."""
        positions = np.asarray(request.evidence, np.int64)
        rows = np.zeros(len(positions), np.int64)
        members = sp.csr_matrix((np.ones(len(positions)), (rows, positions)), shape=(1, self.vectors.shape[0]))
        named = self.label_units(members).iloc[0]
        return LabelResult(named["label"], named["description"], KEYWORD_SOURCE, KEYWORD_VERSION)

    def embed(self, terms: list[str]) -> np.ndarray:
        return embed_cached(terms, self.embed_config, self.workspace)

    @functools.cached_property
    def terms(self) -> CorpusTerms:
        if isinstance(self.texts, list):
            return corpus_terms(self.texts, self.config)
        return streamed_corpus_terms(self.texts, self.vectors.shape[0], self.config)
