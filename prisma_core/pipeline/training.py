"""Training a run (the SAE with its features, keyword labels, themes and families) and rebuilding its themes or
families without retraining."""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from prisma_core.carryover.carry import CarryReport, carry_edits, previous_edited_run
from prisma_core.concepts import analysis
from prisma_core.concepts.families import FamilyConfig
from prisma_core.concepts.themes import ThemeConfig, Themes
from prisma_core.embed import EmbedConfig, model_key
from prisma_core.errors import NotFoundError, PrismaError, StoreError, TrainingError
from prisma_core.interpret.keywords import KeywordConfig
from prisma_core.lineage import embedding_parent, record_stage, versions
from prisma_core.pipeline.document_passages import stored_passages
from prisma_core.pipeline.embedding_choice import dataset_config
from prisma_core.pipeline.evidence import find_run_evidence
from prisma_core.pipeline.run_stages import AFTER_SAE, RunCodes, find_run_families, group_themes, run_codes
from prisma_core.progress import ProgressCallback, ignore_progress
from prisma_core.reading.runs import load_run
from prisma_core.sae import SAEConfig, check_config, suggest_config
from prisma_core.sae.weights import codes_matrix
from prisma_core.store import NamedFamily, RunRecord, Workspace, now_iso
from prisma_core.store.stages import FAMILIES, KEYWORDS, THEMES, TRAINING
from prisma_core.store.vectors import StoredVectors

if TYPE_CHECKING:
    from prisma_core.sae.model import TopKSAE
    from prisma_core.sae.train import PassageRows

CODES_ROWS = 65_536
"""Documents encoded and stored per slice: 2 million activations at k = 32, about 24 MB of rows to write."""


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    metrics: dict[str, Any]
    n_families: int
    n_themes: int
    warnings: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    carried: CarryReport | None = None  # the analyst's edits carried from the dataset's previous edited run


def suggested_sae_config(workspace: Workspace, dataset_id: str, embed_config: EmbedConfig = EmbedConfig()) -> SAEConfig:
    """SAE settings that suit the embedded dataset's size (the defaults of every entry point; explicit settings
    win)."""
    key = model_key(dataset_config(workspace, dataset_id, embed_config))
    shape = workspace.stored_vectors(dataset_id, key).shape
    return suggest_config(*shape, n_passages=workspace.passages.count(key, _text_hashes(workspace, dataset_id)))


def _text_hashes(workspace: Workspace, dataset_id: str) -> list[str]:
    batches = workspace.document_batches(dataset_id, ["text_hash"], CODES_ROWS)
    return pd.unique(np.concatenate([batch["text_hash"].to_numpy() for batch in batches])).tolist()


def train_run(
    workspace: Workspace,
    dataset_id: str,
    sae_config: SAEConfig | None = None,
    embed_config: EmbedConfig = EmbedConfig(),
    family_config: FamilyConfig = FamilyConfig(),
    keyword_config: KeywordConfig = KeywordConfig(),
    theme_config: ThemeConfig = ThemeConfig(),
    progress: ProgressCallback = ignore_progress,
    should_stop: Callable[[], bool] | None = None,
) -> RunSummary:
    """Train an SAE on the dataset's embeddings and store the run with features, themes, keyword labels and
    families. Without an sae_config, the settings suggested for the dataset's size are used.

    Every stage leaves its record after what it made: those after the SAE (`AFTER_SAE`: the keyword labels', the
    sub-themes', the themes' and the families', children of the training's), then the training's, then the run
    record, last; on any failure the run's partial artefacts and records are removed and earlier runs and datasets
    are untouched. `should_stop()` turning true cancels (TrainingError) at the next training step, or before the
    training's record is written, leaving no run.
    """
    embed_config = dataset_config(workspace, dataset_id, embed_config)  # the space the dataset was embedded in
    key = model_key(embed_config)
    source = workspace.stored_vectors(dataset_id, key)
    sae_config = sae_config or suggested_sae_config(workspace, dataset_id, embed_config)
    warnings = check_config(sae_config, *source.shape)
    from prisma_core.sae.io import save_sae  # torch: imported when a run is trained, not when one is read
    from prisma_core.sae.stream import train_from
    from prisma_core.sae.train import resolve_device

    resolve_device(sae_config.device)  # a missing GPU is reported before anything is written
    run_id, run_dir = workspace.new_run_dir()
    seconds: dict[str, float] = {}
    try:
        with _timed(seconds, "train"):
            passages = functools.partial(_training_passages, workspace, dataset_id, key, source.shape[1])
            result = train_from(source, sae_config, progress, should_stop, passages)
            save_sae(result.model, result.config, run_dir)
        with _timed(seconds, "analyse"):
            codes = _store_codes(workspace, run_id, result.model, source, result.found_in)
            _check_dataset_still_there(workspace, dataset_id)
            run = run_codes(workspace, run_id, dataset_id, codes, source, result.config, embed_config, keyword_config)
            find_run_evidence(workspace, run_id, dataset_id, run_dir, embed_config, progress)
        configs = {KEYWORDS: keyword_config, THEMES: theme_config, FAMILIES: family_config}
        made = {stage.name: stage.run(run, configs[stage.name], progress) for stage in AFTER_SAE}
        themes, families = made[THEMES], made[FAMILIES]
        seconds["analyse"] += made[KEYWORDS].seconds
        seconds |= {"themes": themes.seconds, "families": families.seconds}
        trained = TrainedSAE(
            config={"sae": asdict(result.config), "embed": asdict(embed_config)},
            metrics=result.metrics | {"n_documents": source.shape[0]},
        )
        later = {name: asdict(config) for name, config in configs.items()}
        record = RunRecord(
            run_id=run_id,
            dataset_id=dataset_id,
            created_at=now_iso(),
            embedding_key=key,
            config=trained.config | later,
            metrics=result.metrics | families.counts | themes.counts | {"n_documents": source.shape[0]},
            history=result.history,
            weights_dir=str(run_dir),
            versions=versions(),
        )
        _write_run_records(workspace, record, trained, should_stop)
    except BaseException:
        with contextlib.suppress(StoreError):  # the error that stopped the run is the one to report
            workspace.delete_run(run_id)
        raise
    carried = _carry_edits(workspace, run_id, warnings)
    return RunSummary(
        run_id, record.metrics, len(families.families), themes.themes.n_themes, warnings, seconds, carried
    )


def _training_passages(workspace: Workspace, dataset_id: str, key: str, dim: int) -> PassageRows:
    from prisma_core.sae.train import PassageRows

    stored = stored_passages(workspace, dataset_id, key, dim)
    return PassageRows(stored.vectors, stored.position)


def _carry_edits(workspace: Workspace, run_id: str, warnings: list[str]) -> CarryReport | None:
    """The analyst's edits of the dataset's previous edited run, made again on the new run where their concepts
    clearly match; the run is kept whatever happens here (a failure is one more warning)."""
    try:
        previous = previous_edited_run(workspace, run_id)
        return carry_edits(workspace, previous, run_id) if previous else None
    except PrismaError as error:
        warnings.append(f"The edits of the previous run could not be carried over: {error}")
        return None


@dataclass(frozen=True)
class TrainedSAE:
    """What the training's stage record holds: the SAE's and the embedding's settings, and the SAE's metrics (its
    `seconds` among them) with the number of documents it was trained on."""

    config: dict[str, Any]
    metrics: dict[str, Any]


def _write_run_records(
    workspace: Workspace, record: RunRecord, trained: TrainedSAE, should_stop: Callable[[], bool] | None
) -> None:
    """The training's stage record, then the run record, last: unless cancelled or the dataset is gone."""
    if should_stop is not None and should_stop():
        raise TrainingError("Training was cancelled after the SAE was trained; nothing was saved.")
    _check_dataset_still_there(workspace, record.dataset_id)
    parent = embedding_parent(workspace, record.dataset_id, record.embedding_key)
    dataset_id, run_id = record.dataset_id, record.run_id
    record_stage(workspace, TRAINING, parent, dataset_id, trained.config, trained.metrics, run_id, run_id)
    workspace.add_run(record)


@contextlib.contextmanager
def _timed(seconds: dict[str, float], step: str) -> Iterator[None]:
    """Adds how long the block took to `seconds[step]`."""
    started = time.perf_counter()
    yield
    seconds[step] = time.perf_counter() - started


def _check_dataset_still_there(workspace: Workspace, dataset_id: str) -> None:
    """NotFoundError when the dataset was deleted (say, from another session) while its SAE trained."""
    try:
        workspace.dataset(dataset_id)
    except NotFoundError:
        raise NotFoundError("The dataset was deleted while its SAE was training; nothing was saved.") from None


def _store_codes(
    workspace: Workspace, run_id: str, model: TopKSAE, source: StoredVectors, found_in: np.ndarray
) -> sp.csr_matrix:
    """Encode every document, one slice of CODES_ROWS documents at a time, storing each slice's activations and the
    features' statistics (accumulated over the slices, with in how many trainings each was found); returns the codes
    [n_documents, n_features]."""
    from prisma_core.sae.train import encode

    n_documents = source.shape[0]
    totals = analysis.FeatureTotals(model.n_latents)
    values = np.empty((n_documents, model.k), np.float32)  # filled slice by slice: no second copy of the whole
    indices = np.empty((n_documents, model.k), np.int32)
    for start in range(0, n_documents, CODES_ROWS):
        positions = np.arange(start, min(start + CODES_ROWS, n_documents))
        slice_values, slice_indices = encode(model, source.rows(positions))
        workspace.activations.save(run_id, np.repeat(positions, model.k), slice_indices.ravel(), slice_values.ravel())
        totals.add(slice_values, slice_indices)
        values[start : start + len(positions)], indices[start : start + len(positions)] = slice_values, slice_indices
    workspace.feature_stats.save(run_id, totals.stats().assign(found_in=found_in))
    return codes_matrix(values, indices, model.n_latents)


def rebuild_families(
    workspace: Workspace,
    run_id: str,
    config: FamilyConfig,
    progress: ProgressCallback = ignore_progress,
) -> list[NamedFamily]:
    """Recompute a run's families with another tau or number of iterations (replaces the stored set); their
    record makes `config` the run's family settings from now on."""
    return find_run_families(_stored_run_codes(workspace, run_id), config, progress).families


def rebuild_themes(
    workspace: Workspace,
    run_id: str,
    config: ThemeConfig,
    progress: ProgressCallback = ignore_progress,
) -> Themes:
    """Regroup a run's features into another number of themes (no retraining; replaces the stored themes); their
    record makes `config` the run's theme settings from now on."""
    return group_themes(_stored_run_codes(workspace, run_id), config, progress).themes


def _stored_run_codes(workspace: Workspace, run_id: str) -> RunCodes:
    """A trained run's codes and labeller, its vectors in memory or read in slices as when it was trained."""
    run = load_run(workspace, run_id)
    record, settings = run.record, run.settings
    source = workspace.stored_vectors(record.dataset_id, record.embedding_key)
    sae_config = settings.sae or SAEConfig()  # no SAE settings: the default bound
    return run_codes(
        workspace, run_id, record.dataset_id, run.codes, source, sae_config, settings.embed, settings.keywords
    )
