"""Training and analysis from the vectors table a slice at a time (SAEConfig.vectors_memory_mb), on the openings of 300
real BBC articles embedded with the bundled model into a real LanceDB workspace (the session's `bbc_openings`; the
comparison of how well streamed training learns, on the same articles whole, from the shared corpus's vectors)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from bbc_openings import PER_DESK, BbcOpenings
from cached_vectors import SHARED_SPACE, embed_from_shared_vectors

from prisma_core import pipeline
from prisma_core.concepts import analysis
from prisma_core.embed import EmbedConfig, model_key
from prisma_core.ingest import IngestConfig
from prisma_core.pipeline import training
from prisma_core.reading.runs import read_codes
from prisma_core.sae import SAEConfig
from prisma_core.sae.initial import INIT_SAMPLE, MEDIAN_SAMPLE
from prisma_core.sae.io import load_sae
from prisma_core.sae.moments import Moments
from prisma_core.sae.stream import Slices, train_from
from prisma_core.sae.train import feature_codes, train_sae
from prisma_core.store import Workspace
from prisma_core.store import vectors as vectors_module
from prisma_core.store.vectors import StoredVectors

CONFIG = SAEConfig(n_features=64, k=4, epochs=6, batch_size=32, seed=3)
TINY_BOUND_MB = 0.05
"""About 17 vectors of 384 dimensions: every read is one batch of 32 documents."""


class _CountedReads:
    """The workspace's real vectors, remembering how many documents each read asked for."""

    def __init__(self, stored: StoredVectors) -> None:
        self.stored, self.sizes = stored, []

    @property
    def shape(self) -> tuple[int, int]:
        return self.stored.shape

    def rows(self, positions: np.ndarray) -> np.ndarray:
        self.sizes.append(len(positions))
        return self.stored.rows(positions)

    def all(self) -> np.ndarray:
        return self.rows(np.arange(self.shape[0]))


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory, bbc_openings: BbcOpenings) -> tuple[Path, str]:
    """The session's embedded openings, copied: a test here stores a run in the workspace."""
    workspace = bbc_openings.copy(tmp_path_factory.mktemp("stream") / "workspace")
    return workspace.path, bbc_openings.dataset_id


@pytest.fixture(scope="module")
def whole_articles(tmp_path_factory: pytest.TempPathFactory, bbc: pd.DataFrame) -> tuple[Path, str]:
    """The same 300 articles whole: on their openings the streamed and in-memory trainings' FVUs differ by 0.047
    against the test's 0.05 (0.027 on whole articles), too close to hold on another CPU's vectors. Their vectors are
    the shared corpus's, through the embedding cache (in its space, SHARED_SPACE)."""
    folder = tmp_path_factory.mktemp("stream")
    corpus = folder / "bbc300.parquet"
    bbc.groupby("label").head(PER_DESK).to_parquet(corpus)
    workspace = Workspace(folder / "workspace")
    dataset_id, _ = pipeline.ingest(workspace, [corpus], "bbc 300", IngestConfig(id_column="id"))
    embed_from_shared_vectors(workspace, dataset_id, "bbc_news")
    return workspace.path, dataset_id


def _stored(embedded: tuple[Path, str], space: EmbedConfig = EmbedConfig()) -> StoredVectors:
    path, dataset_id = embedded
    return Workspace(path).stored_vectors(dataset_id, model_key(space))


def test_stored_vectors_read_by_position_match_the_whole_table(
    embedded: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vectors_module, "READ_ROWS", 64)  # all() reads 5 slices
    path, dataset_id = embedded
    whole = Workspace(path).vectors(dataset_id, model_key(EmbedConfig()))
    stored = _stored(embedded)
    positions = np.array([299, 0, 17, 17, 150])
    assert stored.shape == whole.shape == (5 * PER_DESK, 384)
    np.testing.assert_array_equal(stored.rows(positions), whole[positions])
    np.testing.assert_array_equal(stored.all(), whole)


def test_moments_merged_over_slices_equal_those_of_the_whole(embedded: tuple[Path, str]) -> None:
    vectors = _stored(embedded).all()
    whole, slices = Moments.of(vectors), Moments(384)
    for start in range(0, 300, 64):
        slices.add(vectors[start : start + 64])
    assert slices.count == whole.count == 300
    np.testing.assert_allclose(slices.mean, whole.mean, rtol=1e-12, atol=1e-15)
    assert slices.squared_deviation == pytest.approx(whole.squared_deviation, rel=1e-12)
    assert slices.squared_norm == pytest.approx(whole.squared_norm, rel=1e-12)
    assert slices.has_variance() and not Moments.of(np.repeat(vectors[:1], 5, axis=0)).has_variance()


def test_streamed_training_reads_bounded_slices_and_learns_as_well(whole_articles: tuple[Path, str]) -> None:
    config = replace(CONFIG, vectors_memory_mb=TINY_BOUND_MB)
    source = _CountedReads(_stored(whole_articles, SHARED_SPACE))
    assert not config.holds_in_memory(*source.shape) and CONFIG.holds_in_memory(*source.shape)
    streamed = train_from(source, config)
    in_memory = train_from(_stored(whole_articles, SHARED_SPACE), CONFIG)

    # Each training reads the training documents twice, sampled (at most MEDIAN_SAMPLE for the initial centre, at
    # most INIT_SAMPLE for the initial directions), and the trainings' features are matched on one more sample of
    # them; every other read holds one block of 32 documents (the bound is below a batch) or the 30 held-out ones.
    samples = 2 * CONFIG.n_trainings + 1
    sampled, others = sorted(source.sizes, reverse=True)[:samples], sorted(source.sizes, reverse=True)[samples:]
    assert sampled == [min(MEDIAN_SAMPLE, INIT_SAMPLE, 270)] * samples and max(others) == CONFIG.batch_size
    assert len(others) > CONFIG.epochs * 300 // CONFIG.batch_size
    for key in ("n_train", "n_holdout", "steps"):
        assert streamed.metrics[key] == in_memory.metrics[key]
    np.testing.assert_array_equal(streamed.holdout_index, in_memory.holdout_index)
    assert streamed.metrics["fvu_holdout"] == pytest.approx(in_memory.metrics["fvu_holdout"], abs=0.05)
    assert streamed.metrics["fvu_train"] == pytest.approx(in_memory.metrics["fvu_train"], abs=0.05)
    assert 0.0 <= streamed.metrics["dead_fraction"] < 0.5
    assert streamed.metrics["mean_l0"] == pytest.approx(CONFIG.k, abs=0.5)
    assert [entry["step"] for entry in streamed.history] == [entry["step"] for entry in in_memory.history]
    # The same initial weights (the split, scale and b_pre are the same), then a different shuffle.
    assert not torch.equal(streamed.model.W_dec, in_memory.model.W_dec)


def test_streamed_metrics_equal_those_of_the_whole_array(embedded: tuple[Path, str]) -> None:
    """The streamed FVUs, dead latents and L0 of one model equal the in-memory computation's."""
    stored = _stored(embedded)
    result = train_sae(stored.all(), CONFIG)
    slices = Slices.of(stored, replace(CONFIG, vectors_memory_mb=TINY_BOUND_MB), result.train_index)
    train, holdout = slices.moments()
    streamed = slices.final_metrics(result.model, train, holdout)
    for key in ("fvu_train", "fvu_holdout", "variance_explained_holdout"):
        assert streamed[key] == pytest.approx(result.metrics[key], rel=1e-5)
    for key in ("dead_fraction", "mean_l0", "n_train", "n_holdout"):
        assert streamed[key] == result.metrics[key]


def test_the_same_seed_gives_the_same_weights_streamed(embedded: tuple[Path, str]) -> None:
    config = replace(CONFIG, vectors_memory_mb=TINY_BOUND_MB, epochs=2)
    first, second = train_from(_stored(embedded), config), train_from(_stored(embedded), config)
    for name, tensor in first.model.state_dict().items():
        assert torch.equal(tensor, second.model.state_dict()[name]), name
    assert first.metrics["fvu_holdout"] == second.metrics["fvu_holdout"]
    other = train_from(_stored(embedded), replace(config, seed=4))
    assert not torch.equal(first.model.W_dec, other.model.W_dec)


def test_a_streamed_run_stores_the_activations_and_statistics_of_the_whole(
    embedded: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the pipeline with the tiny bound, the codes stored slice by slice (here 64 documents a slice) and the
    statistics accumulated over the slices equal those of the whole matrix, for the SAE the run stored."""
    path, dataset_id = embedded
    workspace = Workspace(path)
    monkeypatch.setattr(training, "CODES_ROWS", 64)
    summary = pipeline.train_run(workspace, dataset_id, replace(CONFIG, vectors_memory_mb=TINY_BOUND_MB, epochs=2))
    record = workspace.run_or_latest(summary.run_id, dataset_id)
    assert record.config["sae"]["vectors_memory_mb"] == TINY_BOUND_MB
    model, _ = load_sae(workspace.location(record.weights_dir))
    expected = feature_codes(model, workspace.vectors(dataset_id, model_key(EmbedConfig())))
    stored = read_codes(workspace, summary.run_id, *expected.shape)
    assert stored.nnz == expected.nnz and (np.diff(stored.indptr) <= CONFIG.k).all()
    assert ((stored != 0) != (expected != 0)).nnz == 0
    assert abs(stored - expected).max() <= 1e-6
    features = workspace.feature_stats.of(summary.run_id)
    whole = analysis.feature_stats(expected)
    assert set(features.pop("found_in")) <= set(range(1, CONFIG.n_trainings + 1))
    pd.testing.assert_frame_equal(features, whole, check_dtype=False, rtol=1e-6)
    assert features["density"].sum() == stored.nnz
