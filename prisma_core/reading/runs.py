"""Reading a run back: the read model every view, the labelling and the export share (below the stages).

`load_run` gathers a run's record, codes, features with their shown labels, families and themes in one object;
`resolve_labels` (interpret/label_choice) says which label each feature shows; `family_membership` and
`family_matrix` say which features a family holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd
import scipy.sparse as sp

from prisma_core.concepts import analysis
from prisma_core.concepts.subthemes import SubThemes
from prisma_core.concepts.themes import NO_THEME, ThemeConfig, Themes, themes_from_evidence
from prisma_core.curation.applied_edits import apply_edits
from prisma_core.errors import LostRowsError, RunBehindError, StoreError
from prisma_core.interpret.label_choice import resolve_labels
from prisma_core.run_shape.loaded_run import LoadedRun
from prisma_core.run_shape.run_settings import RunSettings, run_settings
from prisma_core.sae.weights import read_weights
from prisma_core.store import NamedFamily, RunRecord, StageRecord, Workspace
from prisma_core.store.repair import LOST_LABEL, lost_run, lost_run_parts
from prisma_core.store.schemas import KEYWORD_SOURCE, MANUAL_SOURCE
from prisma_core.store.stages import PLACEMENT, REBUILT_STAGES, SETTINGS_STAGES, rebuilt_counts


def with_shown_labels(workspace: Workspace, run_id: str, stats: pd.DataFrame) -> pd.DataFrame:
    """Per-feature `stats` (feature_id, ...) with the label each feature shows as stored now, and its scores (a
    feature whose every label a repair removed shows `LOST_LABEL`)."""
    labelled = stats.merge(resolve_labels(workspace.labels.of(run_id)), on="feature_id", how="left")
    return labelled.fillna({"label": LOST_LABEL, "description": "", "label_source": KEYWORD_SOURCE})


def background_named(features: pd.DataFrame) -> pd.DataFrame:
    """Features (with their shown labels) marked `background` when they are active on most documents
    (`analysis.BACKGROUND_SHARE`): such a feature is something nearly every document has, so unless the analyst
    named it, it shows as "background: in 68% of documents (its words)", not as a topic its words would suggest; its
    words keep two background features apart (a run of k = 32 has several)."""
    background = features["density_fraction"] >= analysis.BACKGROUND_SHARE
    renamed = background & (features["label_source"] != MANUAL_SOURCE)
    shown = features.loc[renamed, ["density_fraction", "label"]]
    features = features.assign(background=background)
    features.loc[renamed, "label"] = [BACKGROUND_LABEL.format(share=s, words=w) for s, w in shown.itertuples(False)]
    return features


BACKGROUND_LABEL = "background: in {share:.0%} of documents ({words})"


def trainings_compared(settings: RunSettings) -> int:
    """How many trainings a run compared to find its features (1 for runs trained before runs compared any)."""
    return settings.sae.n_trainings if settings.sae is not None else 1


def reliability(found_in: object, n_trainings: int) -> str:
    """In words, how reliably a feature comes back: "found in 3 of 3 trainings"; "not checked" when the run
    trained once, or before Prisma recorded it."""
    if n_trainings < 2 or found_in is None or pd.isna(found_in):
        return "not checked (trained once)"
    return f"found in {int(found_in)} of {n_trainings} trainings"


def current_settings(record: RunRecord, stages: Sequence[StageRecord]) -> RunRecord:
    """The run record with the settings and counts of what it shows now: the newest record of its families and of
    its themes (the training's, or a rebuild's since) gives theirs, and the newest placement of added documents its
    document count. `stages`: the run's stage records, oldest first."""
    own = [stage for stage in stages if stage.run_id == record.run_id]
    rebuilt = [stage for stage in own if stage.stage in REBUILT_STAGES and stage.stage in SETTINGS_STAGES]
    config = record.config | {stage.stage: stage.config for stage in rebuilt}
    metrics = record.metrics | rebuilt_counts(own)
    for stage in own:
        if stage.stage == PLACEMENT:
            metrics["n_documents"] = stage.summary["n_documents"]
    return replace(record, config=config, metrics=metrics)


def covered_documents(record: RunRecord, n_dataset: int) -> int:
    """How many of the dataset's documents (its first ones) the run covers: those it was trained on and those placed
    in it since. A run trained before Prisma counted them covers the whole dataset, until documents are added (which
    records the count first, see `pipeline.add_documents`). `record`: as `current_settings` gives it."""
    return int(record.metrics.get("n_documents", n_dataset))


def load_run(
    workspace: Workspace,
    run_id: str | None = None,
    dataset_id: str | None = None,
    previous: LoadedRun | None = None,
    with_edits: bool = True,
) -> LoadedRun:
    """The run as stored now, with the analyst's edits applied (`prisma_core.curation.edits`; `with_edits=False`: as
    trained, every feature shown and none pinned). `previous`: the same run loaded earlier (a view reloading it after
    its labels, families or themes changed): its codes and directions, which never change once written, are taken from
    it instead of being read again, and so are its themes when their stored evidence is the same."""
    stored = workspace.run_or_latest(run_id, dataset_id)
    record = current_settings(stored, workspace.stage_records.of(stored.dataset_id, stored.run_id))
    weights = workspace.location(record.weights_dir)
    n_docs = workspace.dataset(record.dataset_id).n_documents
    if covered_documents(record, n_docs) < n_docs:
        raise RunBehindError(covered_documents(record, n_docs), n_docs)
    same = previous if previous is not None and previous.record.run_id == record.run_id else None
    same = same if same is not None and same.codes.shape[0] == n_docs else None  # documents were placed since
    if same is None:
        directions = read_weights(weights).decoder_directions()  # [n_features, d]
        codes = read_codes(workspace, record.run_id, n_docs, len(directions))
    else:
        directions, codes = same.directions, same.codes
    stats = workspace.feature_stats.of(record.run_id)
    if lost := lost_run_parts(record.metrics, len(stats), codes.nnz, int(stats["density"].sum())):
        raise LostRowsError(lost_run(record.run_id, lost))
    features = background_named(with_shown_labels(workspace, record.run_id, stats))
    n_strong = analysis.strong_density(codes) if same is None else same.features["n_strong"].to_numpy()
    features["n_strong"] = n_strong[features["feature_id"].to_numpy()]
    settings = run_settings(record, directions.shape[1])
    theme_rows = workspace.groups.themes(record.run_id)
    themes = None
    if theme_rows:
        evidence = np.stack([row["evidence"] for row in theme_rows], axis=1)
        member_share = settings.themes.member_share
        themes = same.themes if same is not None and _same_themes(same.themes, evidence, member_share) else None
        themes = themes or stored_themes(theme_rows, codes, settings.themes)
        features["theme_id"] = themes.feature_theme()[features["feature_id"].to_numpy()]
    else:
        features["theme_id"] = -1
    theme_info = pd.DataFrame(
        [{k: v for k, v in row.items() if k != "evidence"} for row in theme_rows],
        columns=["theme_id", "label", "description", "label_source", "n_documents", "features"],
    )
    subtheme_rows = workspace.groups.subthemes(record.run_id)
    subthemes = stored_subthemes(subtheme_rows, themes, codes.shape)
    features["subtheme_id"] = (
        subthemes.feature_subtheme(features["theme_id"].to_numpy()) if subthemes is not None else -1
    )
    subtheme_info = pd.DataFrame(
        [{k: v for k, v in row.items() if k not in ("evidence", "documents")} for row in subtheme_rows]
        if subthemes is not None
        else [],
        columns=["subtheme_id", "theme_id", "label", "description", "label_source", "n_documents", "features"],
    )
    families = workspace.groups.families(record.run_id)
    counts = {"n_themes": len(theme_rows), "n_subthemes": len(subtheme_info), "n_families": len(families)}
    record = replace(record, metrics=record.metrics | counts)  # a save whose record a kill cut off counts
    run = LoadedRun(
        record, settings, weights, codes, directions, features, families, themes, theme_info, subthemes, subtheme_info
    )
    edited, applied = apply_edits(run, workspace.edits.of(record.run_id) if with_edits else [])
    return replace(edited, edited=applied)


def stored_themes(rows: Sequence[dict], codes: sp.csr_matrix, settings: ThemeConfig) -> Themes:
    """The run's themes as stored: their evidence and every document's probabilities (recomputed from the codes for
    themes stored before the probabilities were)."""
    member_share, fit_share = settings.member_share, settings.fit_share
    evidence = np.stack([row["evidence"] for row in rows], axis=1)
    if any(row["probabilities"] is None for row in rows):
        return themes_from_evidence(codes, evidence, member_share, fit_share)
    return Themes(evidence, np.stack([row["probabilities"] for row in rows], axis=1), member_share, fit_share)


def stored_subthemes(rows: Sequence[dict], themes: Themes | None, codes_shape: tuple[int, int]) -> SubThemes | None:
    """The run's sub-themes as stored, None when there are none (runs made before sub-themes existed) or when they
    do not fit the stored themes (a rebuild caught between its two writes)."""
    if not rows or themes is None:
        return None
    theme_of = np.asarray([row["theme_id"] for row in rows], np.int32)
    if theme_of.max() >= themes.n_themes:
        return None
    assignment = np.full(codes_shape[0], NO_THEME, np.int32)
    for row in rows:
        assignment[row["documents"]] = row["subtheme_id"]
    evidence = np.stack([row["evidence"] for row in rows], axis=1)
    return SubThemes(theme_of, assignment, evidence)


def _same_themes(themes: Themes | None, evidence: np.ndarray, member_share: float) -> bool:
    return (
        themes is not None
        and themes.member_share == member_share
        and themes.evidence.shape == evidence.shape
        and np.array_equal(themes.evidence, np.asarray(evidence, np.float32))
    )


CODES_CHANGED = "The run's activations changed while they were read: open the run again."


def read_codes(workspace: Workspace, run_id: str, n_docs: int, n_features: int) -> sp.csr_matrix:
    """The run's sparse codes [n_docs, n_features], read from the activations table a batch at a time into arrays
    sized once (12 bytes per activation), never through a frame of the whole table."""
    n_rows, batches = workspace.activations.batches(run_id)
    positions = np.empty(n_rows, np.int32 if n_docs < 2**31 else np.int64)
    features, values = np.empty(n_rows, np.int32), np.empty(n_rows, np.float32)
    done = 0
    for batch in batches:
        end = done + batch.num_rows
        if end > n_rows:
            raise StoreError(CODES_CHANGED)
        positions[done:end] = batch["position"].to_numpy()
        features[done:end] = batch["feature_id"].to_numpy()
        values[done:end] = batch["value"].to_numpy()
        done = end
    if done != n_rows:
        raise StoreError(CODES_CHANGED)
    return analysis.codes_from_rows(positions, features, values, n_docs, n_features)


def family_membership(families: Sequence[NamedFamily]) -> pd.DataFrame:
    """feature_id -> (family_id, parent) for the first family each feature appears in; roots have no parent."""
    rows: dict[int, tuple[int, int | None]] = {}
    for family in families:
        parent_of = {child: parent for parent, child, _ in family.edges}
        for member in family.members:
            rows.setdefault(member, (family.family_id, parent_of.get(member)))
    return pd.DataFrame(
        [(f, fam, parent) for f, (fam, parent) in rows.items()],
        columns=["feature_id", "family_id", "parent"],
    ).astype({"feature_id": "int32", "family_id": "Int32", "parent": "Int32"})


def document_themes(run: LoadedRun) -> pd.DataFrame:
    """Per document (in stored order): theme_id (its strongest theme, -1 if none), themes (the ids of every theme it
    belongs to, most probable first), subtheme_id (its sub-theme, inside its theme; -1 if none) and fits_theme
    (whether it fits its theme well, see `Themes.fits`)."""
    n_docs = run.codes.shape[0]
    subtheme = run.subthemes.assignment if run.subthemes is not None else np.full(n_docs, NO_THEME, np.int32)
    if run.themes is None:
        return pd.DataFrame(
            {
                "theme_id": np.full(n_docs, NO_THEME, np.int32),
                "themes": [[] for _ in range(n_docs)],
                "subtheme_id": subtheme,
                "fits_theme": np.zeros(n_docs, bool),
            }
        )
    members = run.themes.members()
    themes = [themes_of(members, run.themes.probabilities, d) for d in range(n_docs)]
    return pd.DataFrame(
        {"theme_id": run.themes.strongest(), "themes": themes, "subtheme_id": subtheme, "fits_theme": run.themes.fits()}
    )


def themes_of(members: sp.csr_matrix, probabilities: np.ndarray, position: int) -> list[int]:
    """The themes document `position` belongs to, most probable first. members: `Themes.members()`;
    probabilities: `Themes.probabilities`."""
    own = members.indices[members.indptr[position] : members.indptr[position + 1]].tolist()
    return sorted(own, key=lambda theme: -probabilities[position, theme])


def family_matrix(members: Sequence[Sequence[int]], n_features: int) -> sp.csr_matrix:
    """[n_features, n_families] 0/1: which features each family holds."""
    rows = np.concatenate([np.asarray(m, np.int64) for m in members]) if members else np.empty(0, np.int64)
    cols = np.repeat(np.arange(len(members)), [len(m) for m in members])
    return sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(n_features, len(members)))
