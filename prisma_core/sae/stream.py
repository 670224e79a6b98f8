"""Training from vectors read a slice at a time: corpora whose vectors exceed `SAEConfig.vectors_memory_mb` are
never held in memory whole, so training's memory is bounded by that setting, not by the corpus size.

The streamed path runs the same training loop as `train_sae` (`train.train_on`: same split, scale, initial weights
and steps per epoch) over `StreamedRows` instead of an array in memory, but shuffles differently: every epoch reads
blocks of consecutive documents in a seeded random order, several blocks at a time, and shuffles the documents of
each read. The same seed and vectors give the same weights.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from prisma_core.errors import TrainingError
from prisma_core.progress import ProgressCallback, ignore_progress
from prisma_core.sae.config import VECTOR_BYTES, SAEConfig
from prisma_core.sae.model import TopKSAE
from prisma_core.sae.moments import Moments
from prisma_core.sae.train import (
    EPOCH_HOLDOUT_SAMPLE,
    NO_VARIANCE,
    PassageRows,
    TrainResult,
    check_finite,
    holdout_sample,
    input_scale,
    prepare,
    quality_metrics,
    train_on,
    train_sae,
)

BLOCK_ROWS = 4096
"""Consecutive documents per block, the unit the epochs shuffle (fewer when the memory bound is tiny)."""


class VectorSource(Protocol):
    """Document vectors read by position (`prisma_core.store.vectors.StoredVectors`)."""

    @property
    def shape(self) -> tuple[int, int]: ...

    def rows(self, positions: np.ndarray) -> np.ndarray:
        """Vectors of the documents at these positions, in the order given: [m, d] float32."""
        ...

    def all(self) -> np.ndarray:
        """Every vector in position order, [n_documents, d] float32."""
        ...


def train_from(
    source: VectorSource,
    config: SAEConfig,
    progress: ProgressCallback = ignore_progress,
    should_stop: Callable[[], bool] | None = None,
    passages: Callable[[], PassageRows | None] = lambda: None,
) -> TrainResult:
    """`train_sae` on all the vectors (and `passages()`, when `config.passages`) when they fit
    `config.vectors_memory_mb`; else the same training on the documents alone, reading them a slice at a time (see
    the module's docstring), holding about `config.vectors_memory_mb` of vectors at once. Raises TrainingError as
    `train_sae` does."""
    started = time.perf_counter()
    n_documents, dim = source.shape
    if config.holds_in_memory(n_documents, dim):
        return train_sae(source.all(), config, progress, should_stop, passages() if config.passages else None)
    config, device, train_index, holdout_index = prepare(config, n_documents, dim)
    slices = Slices.of(source, config, train_index)
    moments = slices.moments()
    scale = input_scale(moments[0])
    x_holdout_sample = holdout_sample(source.rows(holdout_index[:EPOCH_HOLDOUT_SAMPLE]), scale, device)
    rows = StreamedRows(slices, train_index, holdout_index, moments, scale, x_holdout_sample, device)
    return train_on(rows, config, device, progress, should_stop, started)


@dataclass(frozen=True)
class Slices:
    """The documents of a source in blocks of consecutive positions, read `blocks_per_read` blocks at a time."""

    source: VectorSource
    is_train: np.ndarray
    """[n_documents] bool: the training documents (the others are held out)."""
    block_rows: int
    blocks_per_read: int

    @classmethod
    def of(cls, source: VectorSource, config: SAEConfig, train_index: np.ndarray) -> Slices:
        """Reads of about half the memory bound: a read is copied once as it is shuffled."""
        n_documents, dim = source.shape
        read_rows = max(config.batch_size, int(config.vectors_memory_mb * 2**20 / (2 * dim * VECTOR_BYTES)))
        block_rows = min(BLOCK_ROWS, read_rows)
        is_train = np.zeros(n_documents, dtype=bool)
        is_train[train_index] = True
        return cls(source, is_train, block_rows, max(1, read_rows // block_rows))

    @property
    def n_blocks(self) -> int:
        return -(-len(self.is_train) // self.block_rows)

    def in_order(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(positions, vectors [m, d]) of every document, in position order, one read at a time."""
        step = self.block_rows * self.blocks_per_read
        for start in range(0, len(self.is_train), step):
            positions = np.arange(start, min(start + step, len(self.is_train)))
            yield positions, self.source.rows(positions)

    def moments(self) -> tuple[Moments, Moments]:
        """Moments of the training and of the held-out vectors; raises TrainingError, as `train_sae` does, when some
        vectors are not finite or all are identical."""
        dim = self.source.shape[1]
        train, holdout, bad_rows = Moments(dim), Moments(dim), 0
        for positions, x in self.in_order():
            bad_rows += int((~np.isfinite(x)).any(axis=1).sum())
            training = self.is_train[positions]
            train.add(x[training])
            holdout.add(x[~training])
        check_finite(bad_rows)
        if len(self.is_train) > 1 and not train.merged(holdout).has_variance():
            raise TrainingError(NO_VARIANCE)
        return train, holdout

    def epoch(
        self, generator: torch.Generator, batch_size: int, scale: float, device: torch.device
    ) -> Iterator[torch.Tensor]:
        """Shuffled batches of the training documents, scaled: blocks in a random order, read `blocks_per_read` at
        a time and shuffled within the read; the documents left over from a read go into the next one."""
        order = torch.randperm(self.n_blocks, generator=generator).numpy()
        left = torch.zeros((0, self.source.shape[1]))
        for first in range(0, len(order), self.blocks_per_read):
            positions = np.concatenate([self._block(block) for block in order[first : first + self.blocks_per_read]])
            positions = positions[self.is_train[positions]]
            read = torch.cat([left, torch.from_numpy(self.source.rows(positions) * scale)])
            read = read[torch.randperm(len(read), generator=generator)]
            usable = len(read) - len(read) % batch_size
            for start in range(0, usable, batch_size):
                yield read[start : start + batch_size].to(device)
            left = read[usable:]

    def final_metrics(self, model: TopKSAE, train: Moments, holdout: Moments) -> dict[str, float | int | str]:
        """`TrainResult.metrics` of the trained model (on the original vectors), one read at a time."""
        device = model.W_dec.device
        fired = np.zeros(model.n_latents, dtype=bool)
        n_active, train_error, holdout_error = 0, 0.0, 0.0
        with torch.no_grad():
            for positions, x in self.in_order():
                x_device = torch.from_numpy(x).to(device)
                values, indices = model.encode_topk(x_device)
                errors = (x_device - model.decode(values, indices)).double().pow(2).sum(dim=1).cpu().numpy()
                training = self.is_train[positions]
                train_error += float(errors[training].sum())
                holdout_error += float(errors[~training].sum())
                active = (values > 0).cpu().numpy() & training[:, None]
                fired[indices.cpu().numpy()[active]] = True
                n_active += int(active.sum())
        scored = holdout.count > 1 and holdout.has_variance()
        fvu_holdout = holdout_error / holdout.squared_deviation if scored else np.nan
        fvu_train = train_error / train.squared_deviation
        return quality_metrics(fvu_train, fvu_holdout, fired, n_active, train.count, holdout.count)

    def _block(self, block: int) -> np.ndarray:
        return np.arange(block * self.block_rows, min((block + 1) * self.block_rows, len(self.is_train)))


@dataclass(frozen=True)
class StreamedRows:
    """`TrainingRows` of stored vectors: the training documents read a slice at a time (`Slices`), no passages."""

    slices: Slices
    train_index: np.ndarray
    holdout_index: np.ndarray
    moments: tuple[Moments, Moments]
    """Of the training and of the held-out documents (`Slices.moments`)."""
    scale: float
    holdout_sample: torch.Tensor
    device: torch.device

    @property
    def dim(self) -> int:
        return self.slices.source.shape[1]

    @property
    def n_rows(self) -> int:
        return len(self.train_index)

    def scaled(self, picked: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(self.slices.source.rows(self.train_index[picked]) * self.scale)

    def epoch(self, generator: torch.Generator, batch_size: int) -> Iterator[torch.Tensor]:
        return self.slices.epoch(generator, batch_size, self.scale, self.device)

    def final_metrics(self, model: TopKSAE) -> dict[str, float | int | str]:
        return self.slices.final_metrics(model, *self.moments)
