"""Exploring a trained run: refract any text into concepts, search documents and features (SPEC section 7)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from prisma_core import analysis
from prisma_core.embed import EmbedConfig, embed_texts
from prisma_core.pipeline import LoadedRun
from prisma_core.sae import encode, load_sae
from prisma_core.store import Workspace

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""A text cell starting with one of these is run as a formula by Excel, LibreOffice and Google Sheets."""


def spreadsheet_csv(frame: pd.DataFrame) -> str:
    """CSV text that spreadsheet tools open as data: a text cell that would start a formula ("=HYPERLINK(...)",
    "+1", "-x", "@SUM") gets a leading apostrophe, which they show as the text itself. Numbers are unchanged."""
    return frame.map(_inert_cell).to_csv(index=False)


def _inert_cell(value: Any) -> Any:
    return f"'{value}" if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value


def run_embed_config(run: LoadedRun) -> EmbedConfig:
    """The embedding settings the run was trained on, so new text lands in the same space."""
    return EmbedConfig(**run.record.config["embed"])


def refract_text(run: LoadedRun, text: str) -> pd.DataFrame:
    """The active concepts of any text: feature_id, value, label; strongest first."""
    vector = embed_texts([text], run_embed_config(run))
    model, _ = load_sae(Path(run.record.weights_dir))
    values, indices = encode(model, vector)
    codes = analysis.codes_matrix(values, indices, model.n_latents)
    return with_labels(analysis.document_features(codes, 0), run)


def refract_document(run: LoadedRun, position: int) -> pd.DataFrame:
    return with_labels(analysis.document_features(run.codes, position), run)


def with_labels(frame: pd.DataFrame, run: LoadedRun) -> pd.DataFrame:
    return frame.merge(run.features[["feature_id", "label"]], on="feature_id", how="left")


def search_documents(workspace: Workspace, run: LoadedRun, query: str, limit: int = 10) -> pd.DataFrame:
    """Documents nearest to a free-text query in embedding space (LanceDB vector search)."""
    vector = embed_texts([query], run_embed_config(run))[0]
    hits = workspace.search_documents(run.record.dataset_id, run.record.embedding_key, vector, limit)
    docs = workspace.documents(run.record.dataset_id, ["position", "title", "text"])
    return hits.merge(docs, on="position", how="left")[["position", "doc_id", "title", "text", "distance"]]


def search_features(run: LoadedRun, query: str) -> pd.DataFrame:
    """Features whose label or description mentions the query (case-insensitive), densest first."""
    needle = query.strip().lower()
    haystack = (run.features["label"].fillna("") + " " + run.features["description"].fillna("")).str.lower()
    matches = run.features[haystack.str.contains(needle, regex=False)] if needle else run.features
    return matches.sort_values("density", ascending=False)


def documents_by_positions(workspace: Workspace, dataset_id: str, positions: np.ndarray) -> pd.DataFrame:
    docs = workspace.documents(dataset_id, ["position", "doc_id", "title", "text"])
    return docs.set_index("position").loc[positions].reset_index()
