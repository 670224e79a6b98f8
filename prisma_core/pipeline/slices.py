"""What embedding a dataset hands between its parts: the vectors of a slice of texts, however they were computed (on
this machine, `pipeline.dataset`, or on a Ray cluster, `pipeline.ray_embedding`), and the progress it reports."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from prisma_core.progress import Progress, ProgressCallback
from prisma_core.store import Passages


@dataclass(frozen=True)
class ComputedSlice:
    """Vectors just computed (text hash -> vector), with the windows and tokens it took, and the texts' passages when
    they were computed too (`position`: the index of each passage's text in `hashes`)."""

    vectors: dict[str, np.ndarray]
    n_chunks: int
    n_tokens: int
    hashes: list[str] | None = None
    passages: Passages | None = None


ComputeSlices = Callable[[pd.DataFrame, ProgressCallback, int], Iterator[ComputedSlice]]
"""Embeds the texts of (text_hash, text) rows and yields their vectors a slice (at least that many documents, or the
last ones) at a time, as they are computed."""


def report_documents(progress: ProgressCallback, done: int, total: int) -> None:
    """Reports `done` of the `total` documents to embed."""
    progress(Progress("embed", done, total, f"{done:,} of {total:,} documents"))
