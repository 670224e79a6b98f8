"""Training a run (the SAE with its features, keyword labels, themes and families) and rebuilding its themes or
families without retraining."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from prisma_core import analysis, sae  # sae's torch parts import when a run is trained, not when one is read
from prisma_core.carry import CarryReport, carry_edits, previous_edited_run
from prisma_core.embed import EmbedConfig, model_key
from prisma_core.errors import NotFoundError, PrismaError, StoreError, TrainingError
from prisma_core.families import FamilyConfig, find_families
from prisma_core.interpret.keyword_labeller import KeywordLabeller
from prisma_core.interpret.keywords import (
    KEYWORD_SOURCE,
    KeywordConfig,
    TextBatches,
    text_batches,
    top_document_members,
)
from prisma_core.interpret.label_scores import ScoreConfig, covering_keywords, label_embedding_scores
from prisma_core.lineage import embedding_parent, record_stage, versions
from prisma_core.progress import Progress, ProgressCallback, ignore_progress
from prisma_core.runs import LoadedRun, family_matrix, load_run
from prisma_core.sae import SAEConfig, check_config, suggest_config
from prisma_core.store import NamedFamily, RunRecord, Workspace, now_iso
from prisma_core.store.vectors import DocumentVectors, StoredVectors
from prisma_core.subthemes import SubThemes, build_subthemes
from prisma_core.themes import ThemeConfig, Themes, build_themes

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
    return suggest_config(*workspace.stored_vectors(dataset_id, model_key(embed_config)).shape)


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

    The run record is written last; on any failure the run's partial artefacts are removed and earlier runs and
    datasets are untouched. `should_stop()` turning true cancels (TrainingError) at the next training step, or
    before the record is written, leaving no run.
    """
    configs = {"embed": embed_config, "families": family_config, "keywords": keyword_config, "themes": theme_config}
    key = model_key(embed_config)
    source = workspace.stored_vectors(dataset_id, key)
    sae_config = sae_config or suggest_config(*source.shape)
    warnings = check_config(sae_config, *source.shape)
    sae.resolve_device(sae_config.device)  # a missing GPU is reported before anything is written
    run_id, run_dir = workspace.new_run_dir()
    seconds: dict[str, float] = {}
    try:
        with _timed(seconds, "train"):
            result = sae.train_from(source, sae_config, progress, should_stop)
            sae.save_sae(result.model, result.config, run_dir)
        with _timed(seconds, "analyse"):
            codes = _store_codes(workspace, run_id, result.model, source, result.found_in)
            vectors = _analysis_vectors(source, result.config)
            labeller = _store_features(
                workspace, run_id, dataset_id, codes, vectors, embed_config, keyword_config, progress
            )
        with _timed(seconds, "themes"):
            themes, subthemes = _store_themes(workspace, run_id, codes, vectors, labeller, theme_config, progress)
        with _timed(seconds, "families"):
            n_families = len(_store_families(workspace, run_id, codes, labeller, family_config, progress))
        record = RunRecord(
            run_id=run_id,
            dataset_id=dataset_id,
            created_at=now_iso(),
            embedding_key=key,
            config={stage: asdict(config) for stage, config in ({"sae": result.config} | configs).items()},
            metrics=result.metrics
            | {"n_families": n_families, "n_themes": themes.n_themes, "n_subthemes": subthemes.n_subthemes}
            | {"n_documents": source.shape[0]},
            history=result.history,
            weights_dir=str(run_dir),
            versions=versions(),
        )
        _write_run_records(workspace, record, should_stop)
    except BaseException:
        with contextlib.suppress(StoreError):  # the error that stopped the run is the one to report
            workspace.delete_run(run_id)
        raise
    carried = _carry_edits(workspace, run_id, warnings)
    return RunSummary(run_id, record.metrics, n_families, themes.n_themes, warnings, seconds, carried)


def _carry_edits(workspace: Workspace, run_id: str, warnings: list[str]) -> CarryReport | None:
    """The analyst's edits of the dataset's previous edited run, made again on the new run where their concepts
    clearly match; the run is kept whatever happens here (a failure is one more warning)."""
    try:
        previous = previous_edited_run(workspace, run_id)
        return carry_edits(workspace, previous, run_id) if previous else None
    except PrismaError as error:
        warnings.append(f"The edits of the previous run could not be carried over: {error}")
        return None


def _store_features(
    workspace: Workspace,
    run_id: str,
    dataset_id: str,
    codes: sp.csr_matrix,
    vectors: DocumentVectors,
    embed_config: EmbedConfig,
    keyword_config: KeywordConfig,
    progress: ProgressCallback,
) -> KeywordLabeller:
    """Store the features' keyword labels; returns the labeller, for the themes and families."""
    _check_dataset_still_there(workspace, dataset_id)
    texts = _corpus_texts(workspace, dataset_id, vectors)
    labeller = KeywordLabeller(workspace, texts, vectors, embed_config, keyword_config)
    progress(Progress("label", 0, 1, "keyword labels"))
    labels = _feature_labels(labeller, codes, vectors, embed_config, keyword_config)
    workspace.add_interpretations(run_id, labels.to_dict(orient="records"))
    return labeller


def _write_run_records(workspace: Workspace, record: RunRecord, should_stop: Callable[[], bool] | None) -> None:
    """The training's stage record, then the run record, last: unless cancelled or the dataset is gone."""
    if should_stop is not None and should_stop():
        raise TrainingError("Training was cancelled after the SAE was trained; nothing was saved.")
    _check_dataset_still_there(workspace, record.dataset_id)
    parent = embedding_parent(workspace, record.dataset_id, record.embedding_key)
    config, metrics = record.config, record.metrics
    record_stage(workspace, "training", parent, record.dataset_id, config, metrics, record.run_id, record.run_id)
    workspace.add_run(record)


@contextlib.contextmanager
def _timed(seconds: dict[str, float], step: str) -> Iterator[None]:
    """Adds how long the block took to `seconds[step]`."""
    started = time.perf_counter()
    yield
    seconds[step] = time.perf_counter() - started


def _analysis_vectors(source: StoredVectors, config: SAEConfig) -> DocumentVectors:
    """The vectors the labels, their scores and the themes read: all in memory when training held them
    (`SAEConfig.holds_in_memory`), else the stored vectors, read a slice at a time (memory bounded by the slice)."""
    return source.all() if config.holds_in_memory(*source.shape) else source


def _corpus_texts(workspace: Workspace, dataset_id: str, vectors: DocumentVectors) -> list[str] | TextBatches:
    """The dataset's texts in position order when its vectors are in memory, else a scan of them in batches."""
    if isinstance(vectors, np.ndarray):
        return workspace.documents(dataset_id, ["position", "text"])["text"].tolist()
    return text_batches(workspace, dataset_id)


def _feature_labels(
    labeller: KeywordLabeller,
    codes: sp.csr_matrix,
    vectors: DocumentVectors,
    embed_config: EmbedConfig,
    keyword_config: KeywordConfig,
) -> pd.DataFrame:
    labels = labeller.label_units(top_document_members(codes, keyword_config.n_top_documents)).rename(
        columns={"unit": "feature_id"}
    )
    score_config = covering_keywords(ScoreConfig(), keyword_config.n_top_documents)
    feature_ids, texts = labels["feature_id"].tolist(), labels["label"].tolist()
    labels["score_embedding"] = label_embedding_scores(
        feature_ids, texts, codes, vectors, embed_config, score_config, labeller.workspace
    ).scores
    return labels


def _check_dataset_still_there(workspace: Workspace, dataset_id: str) -> None:
    """NotFoundError when the dataset was deleted (say, from another session) while its SAE trained."""
    try:
        workspace.dataset(dataset_id)
    except NotFoundError:
        raise NotFoundError("The dataset was deleted while its SAE was training; nothing was saved.") from None


def _store_codes(
    workspace: Workspace, run_id: str, model: sae.TopKSAE, source: StoredVectors, found_in: np.ndarray
) -> sp.csr_matrix:
    """Encode every document, one slice of CODES_ROWS documents at a time, storing each slice's activations and the
    features' statistics (accumulated over the slices, with in how many trainings each was found); returns the codes
    [n_documents, n_features]."""
    n_documents = source.shape[0]
    totals = analysis.FeatureTotals(model.n_latents)
    values = np.empty((n_documents, model.k), np.float32)  # filled slice by slice: no second copy of the whole
    indices = np.empty((n_documents, model.k), np.int32)
    for start in range(0, n_documents, CODES_ROWS):
        positions = np.arange(start, min(start + CODES_ROWS, n_documents))
        slice_values, slice_indices = sae.encode(model, source.rows(positions))
        workspace.save_activations(run_id, np.repeat(positions, model.k), slice_indices.ravel(), slice_values.ravel())
        totals.add(slice_values, slice_indices)
        values[start : start + len(positions)], indices[start : start + len(positions)] = slice_values, slice_indices
    workspace.save_features(run_id, totals.stats().assign(found_in=found_in))
    return sae.codes_matrix(values, indices, model.n_latents)


def _store_themes(
    workspace: Workspace,
    run_id: str,
    codes: sp.csr_matrix,
    vectors: DocumentVectors,
    labeller: KeywordLabeller,
    config: ThemeConfig,
    progress: ProgressCallback,
) -> tuple[Themes, SubThemes]:
    """Build, name and store the run's themes and their sub-themes."""
    themes = build_themes(codes, vectors, config, progress)
    subthemes = build_subthemes(codes, vectors, themes, config.n_subthemes, progress)
    _store_subthemes(workspace, run_id, subthemes, themes, labeller)
    members = themes.members()
    labels = labeller.label_units(members.T.tocsr())
    feature_theme = themes.feature_theme()
    rows = [
        {
            "theme_id": theme,
            "label": labels.loc[theme, "label"],
            "description": labels.loc[theme, "description"],
            "label_source": KEYWORD_SOURCE,
            "n_documents": int(members[:, theme].sum()),
            "features": _strongest_first(np.flatnonzero(feature_theme == theme), themes.evidence[:, theme]),
            "evidence": themes.evidence[:, theme],
            "probabilities": themes.probabilities[:, theme],
        }
        for theme in range(themes.n_themes)
    ]
    workspace.save_themes(run_id, rows)
    return themes, subthemes


def _store_subthemes(
    workspace: Workspace, run_id: str, subthemes: SubThemes, themes: Themes, labeller: KeywordLabeller
) -> None:
    """Store the sub-themes (before the themes, so a reader that finds the new themes finds their sub-themes)."""
    n_documents = len(subthemes.assignment)
    placed = np.flatnonzero(subthemes.assignment >= 0)
    members = sp.csr_matrix(
        (np.ones(len(placed), np.float32), (subthemes.assignment[placed], placed)),
        shape=(subthemes.n_subthemes, n_documents),
    )
    labels = labeller.label_units(members)
    feature_subtheme = subthemes.feature_subtheme(themes.feature_theme())
    rows = [
        {
            "subtheme_id": sub,
            "theme_id": int(subthemes.theme[sub]),
            "label": labels.loc[sub, "label"],
            "description": labels.loc[sub, "description"],
            "label_source": KEYWORD_SOURCE,
            "n_documents": int(members[sub].sum()),
            "features": _strongest_first(np.flatnonzero(feature_subtheme == sub), subthemes.evidence[:, sub]),
            "evidence": subthemes.evidence[:, sub],
            "documents": members[sub].indices,
        }
        for sub in range(subthemes.n_subthemes)
    ]
    workspace.save_subthemes(run_id, rows)


def _strongest_first(features: np.ndarray, evidence: np.ndarray) -> list[int]:
    return [int(f) for f in features[np.argsort(-evidence[features], kind="stable")]]


def _store_families(
    workspace: Workspace,
    run_id: str,
    codes: sp.csr_matrix,
    labeller: KeywordLabeller,
    config: FamilyConfig,
    progress: ProgressCallback,
) -> list[NamedFamily]:
    """The families of the run's features, background features left out: they co-occur with nearly every feature,
    so each would parent one family of everything."""
    families = find_families(analysis.without_features(codes, analysis.background_features(codes)), config, progress)
    family_codes = codes @ family_matrix([f.members for f in families], codes.shape[1])
    labels = labeller.label_units(top_document_members(family_codes, labeller.config.n_top_documents))
    named = [
        NamedFamily(**asdict(family), label=labels.loc[i, "label"], label_source=KEYWORD_SOURCE)
        for i, family in enumerate(families)
    ]
    workspace.save_families(run_id, named)
    return named


def rebuild_families(
    workspace: Workspace,
    run_id: str,
    config: FamilyConfig,
    progress: ProgressCallback = ignore_progress,
) -> list[NamedFamily]:
    """Recompute a run's families with another tau or number of iterations (replaces the stored set); their
    record makes `config` the run's family settings from now on."""
    run = load_run(workspace, run_id)
    families = _store_families(workspace, run_id, run.codes, _run_labeller(workspace, run), config, progress)
    summary = {"n_families": len(families)}
    record_stage(workspace, "families", run_id, run.record.dataset_id, asdict(config), summary, run_id)
    return families


def rebuild_themes(
    workspace: Workspace,
    run_id: str,
    config: ThemeConfig,
    progress: ProgressCallback = ignore_progress,
) -> Themes:
    """Regroup a run's features into another number of themes (no retraining; replaces the stored themes); their
    record makes `config` the run's theme settings from now on."""
    run = load_run(workspace, run_id)
    labeller = _run_labeller(workspace, run)
    themes, subthemes = _store_themes(workspace, run_id, run.codes, labeller.vectors, labeller, config, progress)
    summary = {"n_themes": themes.n_themes, "n_subthemes": subthemes.n_subthemes}
    record_stage(workspace, "themes", run_id, run.record.dataset_id, asdict(config), summary, run_id)
    return themes


def _run_labeller(workspace: Workspace, run: LoadedRun) -> KeywordLabeller:
    """The labeller of a trained run: its texts and vectors in memory or read in slices, as when it was trained."""
    source = workspace.stored_vectors(run.record.dataset_id, run.record.embedding_key)
    vectors = _analysis_vectors(source, run.settings.sae or SAEConfig())  # no SAE settings: the default bound
    texts = _corpus_texts(workspace, run.record.dataset_id, vectors)
    return KeywordLabeller(workspace, texts, vectors, run.settings.embed, run.settings.keywords)
