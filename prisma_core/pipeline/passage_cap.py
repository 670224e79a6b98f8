"""How many passages are stored per dataset: embedding and `pipeline.passages` store what they compute up to
MAX_STORED_PASSAGES for the dataset; the passages of the documents past it are computed again whenever asked for."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from prisma_core.store import Passages, Workspace

MAX_STORED_PASSAGES = 3_000_000
"""Passages stored per dataset and embedding space: 2.3 GB of float16 vectors at 384 dimensions, about 300,000 news
articles of 10 passages each. Whole documents are stored, in the order they are embedded."""


@dataclass
class PassageCap:
    """Stores the passages of one dataset's texts while the dataset stays within MAX_STORED_PASSAGES.

    What the dataset has stored is not read until it matters: while every passage of the space (all datasets) plus
    the new ones fit under the cap, the dataset's surely do; only past that are the dataset's own counted (one scan
    of the table's hashes), then kept up to date as this cap stores more."""

    workspace: Workspace
    dataset_id: str
    embedding_key: str
    stored: int | None = None
    """Passages the dataset has stored, at most (the space's, until `counted`)."""
    counted: bool = False

    def store(self, hashes: Sequence[str], passages: Passages) -> int:
        """Stores the passages of the first texts (`passages.position`: index in `hashes`) that fit, whole texts;
        returns how many."""
        if not len(passages):
            return 0
        per_text = np.bincount(passages.position, minlength=len(hashes))
        fitting = np.cumsum(per_text) <= self._room(len(passages))
        kept = passages.take(fitting[passages.position])
        self.workspace.passages.save(self.embedding_key, hashes, kept)
        self.stored = (self.stored or 0) + len(kept)
        return len(kept)

    def _room(self, wanted: int) -> int:
        if self.stored is None:
            self.stored = self.workspace.passages.rows(self.embedding_key)
        if self.stored + wanted > MAX_STORED_PASSAGES and not self.counted:
            hashes = self.workspace.documents(self.dataset_id, ["text_hash"])["text_hash"].unique().tolist()
            self.stored, self.counted = self.workspace.passages.count(self.embedding_key, hashes), True
        return max(0, MAX_STORED_PASSAGES - self.stored)
