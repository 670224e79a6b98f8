"""The stages of a run after its SAE, in the order training runs them (`AFTER_SAE`): the features' keyword labels,
the themes (whose sub-themes stage splits them) and the families. Each reads the run's codes (`RunCodes`) and its
config, stores what it makes, then leaves its stage record (parent: the run's training record; its config, counts and
seconds) and returns both. Training runs them all, a rebuild the themes or the families."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from prisma_core.concepts import analysis
from prisma_core.concepts.families import FamilyConfig, find_families
from prisma_core.concepts.subthemes import SubThemes, build_subthemes
from prisma_core.concepts.themes import ThemeConfig, Themes, build_themes
from prisma_core.embed import EmbedConfig
from prisma_core.interpret.keyword_labeller import KeywordLabeller
from prisma_core.interpret.keywords import (
    KEYWORD_SOURCE,
    KeywordConfig,
    top_document_members,
)
from prisma_core.interpret.label_scores import ScoreConfig, covering_keywords, label_embedding_scores
from prisma_core.lineage import Stage, record_stage
from prisma_core.pipeline.labelling.labellers import keyword_labeller
from prisma_core.progress import Progress, ProgressCallback
from prisma_core.reading.runs import family_matrix
from prisma_core.sae import SAEConfig
from prisma_core.store import NamedFamily, StageRecord, Workspace
from prisma_core.store.stages import FAMILIES, KEYWORDS, SUBTHEMES, THEMES, shown_counts
from prisma_core.store.vectors import DocumentVectors, StoredVectors


@dataclass(frozen=True)
class RunCodes:
    """What the stages after the SAE read: the run's codes, and its corpus with the settings it was embedded and
    labelled with."""

    workspace: Workspace
    run_id: str
    dataset_id: str
    codes: sp.csr_matrix  # [n_documents, n_features]
    embed: EmbedConfig
    labeller: KeywordLabeller  # the run's texts and vectors (in memory or read in slices) and keyword settings


@dataclass(frozen=True)
class StageOutput:
    record: StageRecord

    @property
    def seconds(self) -> float:
        return float(self.record.summary["seconds"])

    @property
    def counts(self) -> dict[str, Any]:
        return shown_counts(self.record.summary)


@dataclass(frozen=True)
class FeatureLabels(StageOutput):
    labels: pd.DataFrame  # feature_id, label, description, source, score_embedding


@dataclass(frozen=True)
class RunSubthemes(StageOutput):
    subthemes: SubThemes


@dataclass(frozen=True)
class RunThemes(StageOutput):
    themes: Themes
    split: RunSubthemes  # the sub-themes stage's output

    @property
    def counts(self) -> dict[str, Any]:
        return super().counts | self.split.counts


@dataclass(frozen=True)
class RunFamilies(StageOutput):
    families: list[NamedFamily]


def run_codes(
    workspace: Workspace,
    run_id: str,
    dataset_id: str,
    codes: sp.csr_matrix,
    source: StoredVectors,
    sae_config: SAEConfig,
    embed: EmbedConfig,
    keywords: KeywordConfig,
) -> RunCodes:
    """The run's codes with the labeller of its corpus: its vectors in memory when training held them
    (`SAEConfig.holds_in_memory`), else read a slice at a time (memory bounded by the slice)."""
    vectors: DocumentVectors = source.all() if sae_config.holds_in_memory(*source.shape) else source
    labeller = keyword_labeller(workspace, dataset_id, vectors, embed, keywords)
    return RunCodes(workspace, run_id, dataset_id, codes, embed, labeller)


def label_features(run: RunCodes, config: KeywordConfig, progress: ProgressCallback) -> FeatureLabels:
    """Store the features' keyword labels, with how well each label's embedding matches its feature's documents
    (`config`: the settings the run's labeller was made with)."""
    started = time.perf_counter()
    progress(Progress("label", 0, 1, "keyword labels"))
    labels = run.labeller.label_units(top_document_members(run.codes, config.n_top_documents))
    labels = labels.rename(columns={"unit": "feature_id"})
    score_config = covering_keywords(ScoreConfig(), config.n_top_documents)
    feature_ids, texts = labels["feature_id"].tolist(), labels["label"].tolist()
    labels["score_embedding"] = label_embedding_scores(
        feature_ids, texts, run.codes, run.labeller.vectors, run.embed, score_config, run.workspace
    ).scores
    run.workspace.labels.add(run.run_id, labels.to_dict(orient="records"))
    return FeatureLabels(_record(run, KEYWORDS, config, {"n_labelled": len(labels)}, started), labels)


def group_themes(run: RunCodes, config: ThemeConfig, progress: ProgressCallback) -> RunThemes:
    """Build, name and store the run's themes and their sub-themes (replacing any stored); the themes' seconds count
    their sub-themes'."""
    started = time.perf_counter()
    themes = build_themes(run.codes, run.labeller.vectors, config, progress)
    split = split_themes(run, themes, config, progress)
    members = themes.members()
    labels = run.labeller.label_units(members.T.tocsr())
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
    run.workspace.groups.save_themes(run.run_id, rows)
    return RunThemes(_record(run, THEMES, config, {"n_themes": themes.n_themes}, started), themes, split)


def split_themes(run: RunCodes, themes: Themes, config: ThemeConfig, progress: ProgressCallback) -> RunSubthemes:
    """The sub-themes stage: split each of the themes being made, then name, store and record the sub-themes, before
    the themes are stored (so a reader that finds the new themes finds their sub-themes)."""
    started = time.perf_counter()
    subthemes = build_subthemes(run.codes, run.labeller.vectors, themes, config.n_subthemes, progress)
    _store_subthemes(run, subthemes, themes)
    summary = {"n_subthemes": subthemes.n_subthemes}
    return RunSubthemes(_record(run, SUBTHEMES, config, summary, started), subthemes)


def _store_subthemes(run: RunCodes, subthemes: SubThemes, themes: Themes) -> None:
    n_documents = len(subthemes.assignment)
    placed = np.flatnonzero(subthemes.assignment >= 0)
    members = sp.csr_matrix(
        (np.ones(len(placed), np.float32), (subthemes.assignment[placed], placed)),
        shape=(subthemes.n_subthemes, n_documents),
    )
    labels = run.labeller.label_units(members)
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
    run.workspace.groups.save_subthemes(run.run_id, rows)


def _strongest_first(features: np.ndarray, evidence: np.ndarray) -> list[int]:
    return [int(f) for f in features[np.argsort(-evidence[features], kind="stable")]]


def find_run_families(run: RunCodes, config: FamilyConfig, progress: ProgressCallback) -> RunFamilies:
    """Find, name and store the families of the run's features (replacing any stored), background features left
    out: they co-occur with nearly every feature, so each would parent one family of everything."""
    started = time.perf_counter()
    codes = run.codes
    families = find_families(analysis.without_features(codes, analysis.background_features(codes)), config, progress)
    family_codes = codes @ family_matrix([f.members for f in families], codes.shape[1])
    labels = run.labeller.label_units(top_document_members(family_codes, run.labeller.config.n_top_documents))
    named = [
        NamedFamily(**asdict(family), label=labels.loc[i, "label"], label_source=KEYWORD_SOURCE)
        for i, family in enumerate(families)
    ]
    run.workspace.groups.save_families(run.run_id, named)
    return RunFamilies(_record(run, FAMILIES, config, {"n_families": len(named)}, started), named)


def _record(run: RunCodes, stage: str, config: Any, summary: dict[str, Any], started: float) -> StageRecord:
    """The stage's record, once what it made is stored; its parent is the run's training record (the run's id)."""
    summary = summary | {"seconds": time.perf_counter() - started}
    return record_stage(run.workspace, stage, run.run_id, run.dataset_id, asdict(config), summary, run.run_id)


AFTER_SAE = (
    Stage(KEYWORDS, KeywordConfig, label_features),
    Stage(THEMES, ThemeConfig, group_themes),
    Stage(FAMILIES, FamilyConfig, find_run_families),
)
"""The stages training runs after its SAE, in this order: each `run(run_codes, config, progress)` returns its
`StageOutput`. The sub-themes stage (`split_themes`) runs inside the themes'."""
