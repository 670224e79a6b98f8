"""Cached loaders the pages share, each keyed by what it reads: the workspace path, the dataset or run, and the run's
revision (which changes when its labels or families change), so a cached answer is never one for other data."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from prisma_core.pipeline import labelling
from prisma_core.pipeline.comparison import Predictors, group_comparison, group_predictors
from prisma_core.pipeline.downloads import export_in_workspace
from prisma_core.pipeline.intake import Source, load_embedder, preview_sources
from prisma_core.pipeline.read_model import (
    DocumentVectors,
    cooccurrence,
    decoder_similarity,
    densest_features,
    level_units,
    named_units,
)
from prisma_core.pipeline.settings import EmbedConfig, SAEConfig
from prisma_core.pipeline.training import suggested_sae_config
from prisma_core.pipeline.trends import LevelTrends, level_trends, timeline
from ui.state import documents, run_at, workspace_at
from ui.text import feature_name, snippet


@st.cache_data(show_spinner="Reading the files…", max_entries=4)
def upload_preview(file_ids: tuple[str, ...], _sources: list[Source], rows: int) -> pd.DataFrame:
    """The first rows as read (keyed by the uploads' ids, so the bytes are not hashed on every rerun)."""
    return preview_sources(_sources, rows)


TOKEN_SAMPLE = 5_000
"""Documents whose tokens are counted for a large dataset (a seeded sample)."""


@st.cache_data(show_spinner="Counting tokens…", max_entries=8)
def token_statistics(workspace_path: str, dataset_id: str, n_documents: int, config: EmbedConfig) -> dict:
    """Window, tokens and windows per document: of every document, or of a sample of TOKEN_SAMPLE for a large
    dataset (`counted` says how many). Counted by the backend `config` embeds with (its
    tokenizer: OpenVINO's needs no torch; a server's windows by words)."""
    docs = documents(workspace_path, dataset_id, n_documents)
    texts = (docs.sample(TOKEN_SAMPLE) if docs.large else docs.frame)["text"].tolist()
    chunking = load_embedder(config).windows(texts)
    return {
        "window": chunking.window,
        "tokens": chunking.tokens_per_doc,
        "chunks": chunking.chunks_per_doc,
        "counted": len(texts),
        "of": docs.n_documents,
    }


@st.cache_data(show_spinner=False)
def embedding_dim(workspace_path: str, dataset_id: str, vector_space: str) -> int:
    return workspace_at(workspace_path).stored_vectors(dataset_id, vector_space).dim


@st.cache_data(show_spinner=False, max_entries=4)
def suggested_settings(workspace_path: str, dataset_id: str, n_documents: int, embedding: EmbedConfig) -> SAEConfig:
    """The SAE settings suggested for the dataset when it holds `n_documents` (they count its stored passages, one
    scan of its documents: not on every rerun of the Train page)."""
    return suggested_sae_config(workspace_at(workspace_path), dataset_id, embedding)


@st.cache_resource(show_spinner="Loading the document vectors…", max_entries=2)
def document_vectors(
    workspace_path: str, dataset_id: str, n_documents: int, vector_space: str
) -> DocumentVectors | None:
    """A small dataset's vectors in one space, held in memory for search (stored vectors never change); None for a
    large one, which is searched in the vectors table by LanceDB."""
    if documents(workspace_path, dataset_id, n_documents).large:
        return None
    return DocumentVectors.from_vectors(workspace_at(workspace_path).vectors(dataset_id, vector_space))


@st.cache_resource(show_spinner=False, max_entries=4)
def document_choices(workspace_path: str, dataset_id: str, n_documents: int) -> list[str]:
    """How each document of a small dataset is named in a picker, in position order: "doc_id · title" (the text's
    start without a title). Built once per dataset: naming 10,000 documents on every rerun took seconds."""
    docs = documents(workspace_path, dataset_id, n_documents).frame
    return [
        f"{doc_id} · {title or snippet(text, 60)}"
        for doc_id, title, text in zip(docs["doc_id"], docs["title"], docs["text"], strict=True)
    ]


@st.cache_data(show_spinner="Computing diagnostics…", max_entries=8)
def diagnostics(workspace_path: str, run_id: str, revision: int, n: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The n densest features' names, decoder similarity and co-occurrence."""
    run = run_at(workspace_path, run_id, revision)
    densest = densest_features(run, n)
    names = [feature_name(f, label)[:40] for f, label in zip(densest["feature_id"], densest["label"], strict=True)]
    ids = densest["feature_id"].tolist()
    return names, decoder_similarity(run.directions, ids), cooccurrence(run.codes, ids)


@st.cache_data(show_spinner=False, max_entries=4)
def metadata(workspace_path: str, dataset_id: str, n_documents: int) -> pd.DataFrame:
    """The dataset's metadata when it holds `n_documents` (the cache key: documents can be added)."""
    return workspace_at(workspace_path).metadata(dataset_id)


@st.cache_data(show_spinner="Comparing the groups and testing every difference…", max_entries=8)
def comparison(workspace_path: str, run_id: str, revision: int, level: str, groups: pd.Series) -> pd.DataFrame:
    """group_comparison at a level, with each concept's id (`unit`) and name (`concept`)."""
    codes, units = level_units(run_at(workspace_path, run_id, revision), level)
    return named_units(group_comparison(codes, groups), level, units)


@st.cache_data(show_spinner="Learning which concepts predict the groups, on documents kept aside…", max_entries=8)
def predictors(workspace_path: str, run_id: str, revision: int, level: str, groups: pd.Series) -> Predictors | None:
    """group_predictors at a level, with each concept's id (`unit`) and name (`concept`)."""
    codes, units = level_units(run_at(workspace_path, run_id, revision), level)
    found = group_predictors(codes, groups)
    if found is None:
        return None
    return replace(found, frame=named_units(found.frame, level, units))


@st.cache_data(show_spinner="Following the concepts over time and testing every change…", max_entries=8)
def trends(
    workspace_path: str,
    run_id: str,
    revision: int,
    level: str,
    dates: pd.Series,
    period: str,
    compared: tuple[int, int] | None,
) -> LevelTrends:
    """level_trends of the run at this revision, over the periods of `dates`."""
    return level_trends(run_at(workspace_path, run_id, revision), timeline(dates, period), level, compared)


@st.cache_resource(show_spinner="Preparing the export…", max_entries=2)
def export_folder(workspace_path: str, run_id: str, revision: int) -> Path:
    return export_in_workspace(workspace_at(workspace_path), run_id)


@st.cache_data(show_spinner="Scoring the labels against shuffled ones…", max_entries=8)
def label_score_baseline(workspace_path: str, run_id: str, revision: int) -> labelling.ScoreBaseline:
    return labelling.score_baseline(workspace_at(workspace_path), run_at(workspace_path, run_id, revision))
