"""Documents added to a dataset, placed in its runs without retraining.

Each run encodes the new documents with its own SAE (the features stay those it learned), stores their activations,
and gives each a theme by the same score the themes were built with: its features' vote (the stored evidence) plus
how close it lies to each theme's centre, the centres now the mean direction of each theme's documents (a seeded
sample of them, in the embedding space; the themes' own centres were found in a reduced space that is not kept). A
new document's sub-theme is the nearest sub-theme centre within its theme, as for the documents the run had. Labels,
families and the analyst's edits stay; the features' counts are taken again over every document.

Whether a new training would change the picture is judged from three numbers (`Placement.reasons`): how large a share
of the dataset the documents added since training are, how much of the new documents' detail the features reproduce
compared with the documents held out of training, and how many of them fit no theme well compared with the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from prisma_core.concepts import analysis
from prisma_core.concepts.subthemes import nest_documents
from prisma_core.concepts.themes import POSITION_WEIGHT, ThemeConfig, Themes, document_probabilities
from prisma_core.ingest import IngestConfig, Source
from prisma_core.lineage import record_stage
from prisma_core.pipeline.dataset import AddedDocuments, add_documents, embed_dataset
from prisma_core.pipeline.evidence import extend_run_evidence
from prisma_core.progress import Progress, ProgressCallback, ignore_progress
from prisma_core.reading.run_quality import Placement
from prisma_core.reading.runs import (
    covered_documents,
    current_settings,
    read_codes,
    stored_subthemes,
    stored_themes,
)
from prisma_core.run_shape.run_settings import run_settings
from prisma_core.sae.weights import SAEWeights, read_weights
from prisma_core.store import RunRecord, StageRecord, Workspace
from prisma_core.store.datasets import sample_positions
from prisma_core.store.stages import PLACEMENT
from prisma_core.store.vectors import StoredVectors, unit_rows

PLACE_ROWS = 65_536
"""New documents encoded and stored at a time."""
CENTRE_SAMPLE = 20_000
"""Documents of the run read to find the centres of its themes and sub-themes, and documents (old and new) whose
detail the features reproduce is measured: a seeded sample of at most this many."""
NEW_SHARE = 0.25
"""From this share of the dataset, the documents added since training (in one addition or several) are alone reason to
train again: the features were learned without a quarter of what the dataset now holds."""
DETAIL_DROP = 0.10
"""The features reproducing this much less of the new documents' detail than of the others' (0.10: 45% against 55%)
means the new documents hold what the run has no feature for."""
NO_FIT_RISE = 0.10
"""This much larger a share of the new documents fitting no theme well than of the others means they hold subjects
the themes do not."""


def grow_dataset(
    workspace: Workspace,
    dataset_id: str,
    files: Sequence[str | Path] | Sequence[Source],
    config: IngestConfig | None = None,
    progress: ProgressCallback = ignore_progress,
) -> tuple[AddedDocuments, list[Placement]]:
    """Add files' documents to a dataset, embed them and place them in every run of the dataset, holding the dataset
    all along: a second addition or placement meanwhile is refused before it stores anything."""
    with workspace.adding_documents(dataset_id):
        for run in workspace.runs(dataset_id):
            _record_coverage(workspace, run)
        added = add_documents(workspace, dataset_id, files, config, progress)
        return added, place_in_runs(workspace, dataset_id, progress)


def place_in_runs(
    workspace: Workspace, dataset_id: str, progress: ProgressCallback = ignore_progress
) -> list[Placement]:
    """Embed the dataset's documents not embedded yet (in each run's embedding space) and place them in every run
    that does not cover them, oldest run first; one addition or placement per dataset at a time."""
    placements = []
    with workspace.adding_documents(dataset_id):
        for run in sorted(workspace.runs(dataset_id), key=lambda run: run.created_at):
            embed_dataset(workspace, dataset_id, run_settings(run).embed, progress)
            placements.append(place_new_documents(workspace, run.run_id, progress))
    return placements


def place_new_documents(workspace: Workspace, run_id: str, progress: ProgressCallback = ignore_progress) -> Placement:
    """Encode the documents added to the run's dataset since it was trained (or last placed) with its SAE and give
    them themes and sub-themes; the stage record, written last, makes the run cover them. Their vectors must be
    stored (`embed_dataset`)."""
    stored = workspace.run(run_id)
    stages = workspace.stage_records.of(stored.dataset_id, run_id)
    record = current_settings(stored, stages)
    n_total = workspace.dataset(record.dataset_id).n_documents
    n_before = covered_documents(record, n_total)
    if n_before >= n_total:
        return Placement(run_id, n_before, 0, np.nan, np.nan, np.nan, np.nan)
    source = workspace.stored_vectors(record.dataset_id, record.embedding_key)
    weights = read_weights(workspace.location(record.weights_dir))
    workspace.activations.remove_from(run_id, n_before)  # what a killed placement left
    old_codes = read_codes(workspace, run_id, n_before, weights.n_latents)
    new_codes = _encode_and_store(workspace, run_id, weights, source, n_before, n_total, progress)
    codes = sp.vstack([old_codes, new_codes]).tocsr()
    _update_feature_stats(workspace, run_id, codes)
    sample = sample_positions(n_before, CENTRE_SAMPLE)
    centres = _Centres(source.rows(sample))
    settings = run_settings(record)
    fits = _place_in_themes(workspace, record, settings.themes, old_codes, new_codes, sample, centres, source)
    weights_dir = workspace.location(record.weights_dir)
    extend_run_evidence(workspace, run_id, record.dataset_id, weights_dir, settings.embed, n_before)
    detail_before = _held_out_detail(record)
    if np.isnan(detail_before):
        detail_before = _detail(weights, source.rows(sample), old_codes[sample], centres.mean)
    added = sample_positions(n_total - n_before, CENTRE_SAMPLE)  # positions among the new documents
    detail_added = _detail(weights, source.rows(n_before + added), new_codes[added], centres.mean)
    new_share = 1 - _trained_on(stored, stages, n_before) / n_total
    placement = _judged(run_id, n_before, n_total - n_before, new_share, (detail_added, detail_before), fits)
    summary = asdict(placement) | {"n_documents": n_total}
    record_stage(workspace, PLACEMENT, run_id, record.dataset_id, {}, summary, run_id)
    progress(Progress("place", n_total - n_before, n_total - n_before, "new documents placed"))
    return placement


def _trained_on(stored: RunRecord, stages: Sequence[StageRecord], n_before: int) -> int:
    """How many documents the run was trained on: its training's count, else the count recorded before documents
    were first added (runs trained before Prisma counted them)."""
    if "n_documents" in stored.metrics:
        return int(stored.metrics["n_documents"])
    placed = [stage for stage in stages if stage.run_id == stored.run_id and stage.stage == PLACEMENT]
    return int(placed[0].summary["n_documents"]) if placed else n_before


def _record_coverage(workspace: Workspace, run: RunRecord) -> None:
    """Before documents are added: the count of documents a run covers, for runs trained before Prisma recorded it."""
    record = current_settings(run, workspace.stage_records.of(run.dataset_id, run.run_id))
    if "n_documents" not in record.metrics:
        n_documents = workspace.dataset(run.dataset_id).n_documents
        record_stage(workspace, PLACEMENT, run.run_id, run.dataset_id, {}, {"n_documents": n_documents}, run.run_id)


def _encode_and_store(
    workspace: Workspace,
    run_id: str,
    weights: SAEWeights,
    source: StoredVectors,
    start: int,
    end: int,
    progress: ProgressCallback,
) -> sp.csr_matrix:
    """Codes [end - start, n_features] of the documents at positions start..end-1, stored a slice at a time."""
    parts = []
    for first in range(start, end, PLACE_ROWS):
        positions = np.arange(first, min(first + PLACE_ROWS, end))
        codes = weights.feature_codes(source.rows(positions))
        rows = codes.tocoo()
        workspace.activations.save(run_id, positions[rows.row], rows.col.astype(np.int32), rows.data)
        parts.append(codes)
        done = positions[-1] + 1 - start
        progress(Progress("place", done, end - start, f"{done:,} of {end - start:,} new documents encoded"))
    return sp.vstack(parts).tocsr()


def _update_feature_stats(workspace: Workspace, run_id: str, codes: sp.csr_matrix) -> None:
    totals = analysis.FeatureTotals(codes.shape[1])
    totals.add(codes.data, codes.indices, n_documents=codes.shape[0])
    found_in = workspace.feature_stats.of(run_id).set_index("feature_id")["found_in"]
    stats = totals.stats()
    workspace.feature_stats.update(run_id, stats.assign(found_in=found_in.reindex(stats["feature_id"]).to_numpy()))


class _Centres:
    """Directions of groups of documents, from a sample of the run's documents: unit vectors, the sample's mean
    removed, at unit length again (as the themes were seeded, without the reduction to principal components)."""

    def __init__(self, sample_vectors: np.ndarray) -> None:
        self.mean = sample_vectors.mean(axis=0) if len(sample_vectors) else np.zeros(sample_vectors.shape[1])
        self._unit_mean = unit_rows(sample_vectors).mean(axis=0) if len(sample_vectors) else 0.0
        self.sample_points = self.points(sample_vectors)

    def points(self, vectors: np.ndarray) -> np.ndarray:
        return unit_rows(unit_rows(vectors) - self._unit_mean).astype(np.float32)

    def of_groups(self, groups: np.ndarray, n_groups: int) -> np.ndarray:
        """[n_groups, d] the unit mean direction of each group's sampled documents (zero for a group with none):
        groups [sample] is each sampled document's group, NO_THEME for none."""
        placed = groups >= 0
        sums = np.zeros((n_groups, self.sample_points.shape[1]), np.float64)
        np.add.at(sums, groups[placed], self.sample_points[placed])
        return unit_rows(sums).astype(np.float32)


def _place_in_themes(
    workspace: Workspace,
    record: RunRecord,
    config: ThemeConfig,
    old_codes: sp.csr_matrix,
    new_codes: sp.csr_matrix,
    sample: np.ndarray,
    centres: _Centres,
    source: StoredVectors,
) -> tuple[np.ndarray, np.ndarray]:
    """Store the run's themes and sub-themes with the new documents in them; returns whether each old and each new
    document fits its theme well (both empty for a run without themes). `config`: the run's theme settings."""
    n_before = old_codes.shape[0]
    rows = [_of_first(row, "probabilities", n_before) for row in workspace.groups.themes(record.run_id)]
    if not rows:
        return np.zeros(0, bool), np.zeros(0, bool)
    old = stored_themes(rows, old_codes, config)
    theme_centres = centres.of_groups(old.strongest()[sample], old.n_themes)
    n_total = n_before + new_codes.shape[0]
    new_points = centres.points(source.rows(np.arange(n_before, n_total)))
    position = POSITION_WEIGHT * (new_points @ theme_centres.T)
    new_probabilities = document_probabilities(new_codes, old.evidence, position)
    themes = Themes(old.evidence, np.vstack([old.probabilities, new_probabilities]), old.member_share, old.fit_share)
    subtheme_rows = [_of_first(row, "documents", n_before) for row in workspace.groups.subthemes(record.run_id)]
    subthemes = stored_subthemes(subtheme_rows, old, old_codes.shape)
    if subthemes is not None:
        new_strongest = themes.strongest()[n_before:]
        sub_centres = centres.of_groups(subthemes.assignment[sample], subthemes.n_subthemes)
        closeness = new_points @ sub_centres.T
        _, new_assignment = nest_documents(subthemes.theme, closeness, new_strongest, themes.n_themes)
        assignment = np.concatenate([subthemes.assignment, new_assignment])
        workspace.groups.save_subthemes(
            record.run_id,
            [_with_documents(row, np.flatnonzero(assignment == row["subtheme_id"])) for row in subtheme_rows],
        )
    members = themes.members()
    workspace.groups.save_themes(
        record.run_id,
        [
            row | {"probabilities": themes.probabilities[:, i], "n_documents": int(members[:, i].sum())}
            for i, row in enumerate(rows)
        ],
    )
    fits = themes.fits()
    return fits[:n_before], fits[n_before:]


def _with_documents(row: dict, documents: np.ndarray) -> dict:
    return row | {"documents": documents, "n_documents": len(documents)}


def _of_first(row: dict, column: str, n_documents: int) -> dict:
    """A stored theme's (probabilities) or sub-theme's (documents) row as it was for the run's first `n_documents`
    documents: a placement stopped half-way may have stored them for the new documents too."""
    values = row[column]
    if values is None:
        return row
    kept = values[:n_documents] if column == "probabilities" else values[values < n_documents]
    return row | {column: kept}


def _held_out_detail(record: RunRecord) -> float:
    """1 - FVU on the documents the SAE was not trained on (NaN when the run held none out): the new documents are
    compared with these, not with those the features were fitted to."""
    fvu = record.metrics.get("fvu_holdout")
    return 1.0 - float(fvu) if fvu is not None and np.isfinite(fvu) else float("nan")


def _detail(weights: SAEWeights, vectors: np.ndarray, codes: sp.csr_matrix, mean: np.ndarray) -> float:
    """1 - FVU: the share of the documents' variation around `mean` (the run's documents' mean) that the features
    reproduce; NaN without documents."""
    if not len(vectors):
        return float("nan")
    reconstruction = np.asarray(codes @ weights.W_dec) + weights.b_pre
    missed = float(((vectors - reconstruction) ** 2).sum())
    total = float(((vectors - mean) ** 2).sum())
    return 1.0 - missed / max(total, 1e-12)


def _judged(
    run_id: str,
    n_before: int,
    n_added: int,
    new_share: float,
    details: tuple[float, float],
    fits: tuple[np.ndarray, np.ndarray],
) -> Placement:
    """The placement with its reasons to train again: `new_share`, the share of the dataset's documents added since
    training (this time and before); `details`, how much of the new documents' detail the features reproduce and of
    the held-out documents'; `fits`, whether each old and each new document fits its theme well."""
    detail_added, detail_before = details
    old_fits, new_fits = fits
    no_fit_before = float(1 - old_fits.mean()) if len(old_fits) else float("nan")
    no_fit_added = float(1 - new_fits.mean()) if len(new_fits) else float("nan")
    reasons = []
    if new_share >= NEW_SHARE:
        reasons.append(
            f"the documents added since training are {new_share:.0%} of the dataset, and its features were learned "
            "without them"
        )
    if detail_added < detail_before - DETAIL_DROP:
        reasons.append(
            f"the features reproduce {detail_added:.0%} of the new documents' detail, against {detail_before:.0%} for "
            "documents they were not trained on: the new documents hold things the run has no feature for"
        )
    if no_fit_added > no_fit_before + NO_FIT_RISE:
        reasons.append(
            f"{no_fit_added:.0%} of the new documents fit no theme well, against {no_fit_before:.0%} of the others: "
            "they may hold subjects the themes do not"
        )
    return Placement(run_id, n_before, n_added, detail_added, detail_before, no_fit_added, no_fit_before, reasons)
