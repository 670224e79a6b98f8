"""Exploring a trained run: refract any text into concepts, search documents and features (SPEC section 7)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from prisma_core.concepts import analysis
from prisma_core.embed import embed_texts
from prisma_core.errors import NotFoundError
from prisma_core.names import unit_names
from prisma_core.progress import Progress, ProgressCallback, ignore_progress
from prisma_core.reading.runs import LoadedRun, family_matrix
from prisma_core.sae.weights import read_weights
from prisma_core.store import Workspace
from prisma_core.store.datasets import SHOWN_COLUMNS, is_large, sample_positions
from prisma_core.store.vectors import DocumentVectors as StoredOrInMemory
from prisma_core.store.vectors import unit_rows, vector_rows

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""A text cell starting with one of these is run as a formula by Excel, LibreOffice and Google Sheets."""


def spreadsheet_csv(frame: pd.DataFrame) -> str:
    """CSV text that spreadsheet tools open as data: a text cell that would start a formula ("=HYPERLINK(...)",
    "+1", "-x", "@SUM") gets a leading apostrophe, which they show as the text itself; so does a column name (a
    metadata column can be named anything). Numbers are unchanged."""
    inert = frame.map(_inert_cell)
    inert.columns = [_inert_cell(str(column)) for column in frame.columns]
    return inert.to_csv(index=False)


def _inert_cell(value: Any) -> Any:
    return f"'{value}" if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value


def refract_text(run: LoadedRun, text: str) -> pd.DataFrame:
    """The active concepts of any text: feature_id, value, label; strongest first."""
    vector = embed_texts([text], run.settings.embed)
    codes = read_weights(run.weights).feature_codes(vector)
    return with_labels(analysis.document_features(codes, 0), run)


def refract_document(run: LoadedRun, position: int) -> pd.DataFrame:
    return with_labels(analysis.document_features(run.codes, position), run)


def with_labels(frame: pd.DataFrame, run: LoadedRun) -> pd.DataFrame:
    """Adds each feature's label, in how many trainings it was found, and `strong`: whether it is one of the handful
    of concepts that matter for the document (`analysis.strong_activations`, against the strongest feature shown);
    the others are weak traces, best folded away. Features the analyst hid are left out."""
    labels = run.features.loc[~run.features["hidden"], ["feature_id", "label", "found_in"]]
    shown = frame.merge(labels, on="feature_id", how="inner")
    shown.insert(2, "strong", analysis.strong_activations(shown["value"], shown["value"].max()))
    return shown


def split_strong(refraction: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A refraction (as `with_labels` gives it) split into its strong concepts and its weak ones."""
    strong = refraction["strong"].to_numpy(bool)
    return refraction[strong].reset_index(drop=True), refraction[~strong].reset_index(drop=True)


@dataclass(frozen=True)
class DocumentVectors:
    """A dataset's document vectors held in memory for exact cosine search: each row scaled to unit length once
    (document vectors are averages of chunk vectors, so not unit-norm unless the embedding normalised them), row i
    being the document at position i."""

    unit: np.ndarray  # [n_documents, d] float32

    @classmethod
    def from_vectors(cls, vectors: np.ndarray) -> DocumentVectors:
        return cls(unit_rows(vectors).astype(np.float32))

    def nearest(self, query: np.ndarray, limit: int) -> pd.DataFrame:
        """The `limit` documents nearest to `query` by cosine: position, distance (1 - cosine), nearest first."""
        query = np.asarray(query, dtype=np.float32)
        similarity = self.unit @ unit_rows(query[None, :])[0]
        limit = min(limit, len(similarity))
        best = np.argpartition(-similarity, limit - 1)[:limit] if limit else np.empty(0, dtype=np.int64)
        best = best[np.argsort(-similarity[best], kind="stable")]
        return pd.DataFrame({"position": best.astype(np.int64), "distance": 1.0 - similarity[best].astype(np.float64)})


@dataclass(frozen=True)
class DatasetDocuments:
    """A dataset's documents as the app reads them: a small dataset is held whole in memory (`frame`: position,
    doc_id, title, text); a large one (`store.datasets.is_large`) is read from the store, only the documents shown,
    by position or by id (`frame` is None)."""

    workspace: Workspace
    dataset_id: str
    n_documents: int
    frame: pd.DataFrame | None

    @classmethod
    def open(cls, workspace: Workspace, dataset_id: str) -> DatasetDocuments:
        n_documents = workspace.dataset(dataset_id).n_documents
        frame = None if is_large(n_documents) else workspace.documents(dataset_id, SHOWN_COLUMNS)
        return cls(workspace, dataset_id, n_documents, frame)

    @property
    def large(self) -> bool:
        return self.frame is None

    def at(self, positions: np.ndarray | pd.Series | list[int]) -> pd.DataFrame:
        """position, doc_id, title, text of the documents at these positions, in their order."""
        positions = np.asarray(positions, dtype=np.int64)
        if self.frame is None:
            return self.workspace.documents_at(self.dataset_id, positions)
        return documents_by_positions(self.frame, positions)

    def beside(self, frame: pd.DataFrame) -> pd.DataFrame:
        """`frame` (with a `position` column) with each row's document (doc_id, title, text) added beside it."""
        shown = self.at(frame["position"]).drop(columns="position")
        return pd.concat([frame.reset_index(drop=True), shown], axis=1)

    def with_id(self, doc_id: str) -> pd.DataFrame:
        """The document with this id (no row when there is none)."""
        if self.frame is None:
            return self.workspace.documents_with_ids(self.dataset_id, [doc_id])
        return self.frame[self.frame["doc_id"] == doc_id].reset_index(drop=True)

    def sample(self, size: int, seed: int = 0) -> pd.DataFrame:
        """A seeded random sample of `size` documents (every document when there are fewer), in position order."""
        return self.at(sample_positions(self.n_documents, size, seed))


def search_documents(
    run: LoadedRun, query: str, documents: DatasetDocuments, vectors: DocumentVectors | None, limit: int = 10
) -> pd.DataFrame:
    """Documents nearest to a free-text query in embedding space: position, doc_id, title, text, distance (1 -
    cosine), nearest first. With `vectors` (held in memory) by exact cosine search; without, by LanceDB's vector
    search on the stored vectors table (exact below its index size, see store.vectors.INDEX_MIN_ROWS)."""
    vector = embed_texts([query], run.settings.embed)[0]
    if vectors is None:
        found = documents.workspace.search_documents(documents.dataset_id, run.record.embedding_key, vector, limit)
        hits = found[["position", "distance"]].reset_index(drop=True)
    else:
        hits = vectors.nearest(vector, limit)
    return documents.beside(hits)[["position", "doc_id", "title", "text", "distance"]]


def search_features(run: LoadedRun, query: str) -> pd.DataFrame:
    """Features the analyst did not hide whose label or description mentions the query (case-insensitive): pinned
    ones first, then the topics found in the most trainings, densest first among them, background features last."""
    needle = query.strip().lower()
    shown = run.features[~run.features["hidden"]]
    haystack = (shown["label"].fillna("") + " " + shown["description"].fillna("")).str.lower()
    matches = shown[haystack.str.contains(needle, regex=False)] if needle else shown
    order = ["pinned", "background", "found_in", "density"]
    return matches.sort_values(order, ascending=[False, True, False, False], na_position="last", kind="stable")


def documents_by_positions(documents: pd.DataFrame, positions: np.ndarray) -> pd.DataFrame:
    """The rows of a dataset's documents (position, doc_id, title, text) at these positions, in their order."""
    return documents.set_index("position").loc[positions].reset_index()


LEVELS = ("theme", "subtheme", "family", "feature")
"""The levels of the concept hierarchy an analyst reads top-down."""
MAP_POINTS = 5000
"""Documents drawn on the corpus map at most (a seeded sample of larger corpora)."""


def level_units(run: LoadedRun, level: str) -> tuple[sp.csr_matrix, pd.DataFrame]:
    """The documents x units matrix of one level and its units (`level_names`), for concept queries and group
    comparison at that level.

    theme: 1 where the document belongs to the theme; subtheme: 1 in the document's sub-theme; feature: its strong
    activations (`analysis.strong_codes`: at least a quarter of the document's largest, so "contains" means the
    concept is among what the document is about, not any of its k active features); family: the document's
    strongest of these among the family's features.
    """
    if level == "theme" and run.themes is None:
        raise NotFoundError("This run was made before themes existed: regroup its features into themes first.")
    if level == "subtheme" and run.subthemes is None:
        raise NotFoundError("This run was grouped before sub-themes existed: regroup its themes first.")
    units = level_names(run, level)
    if level == "theme":
        return run.themes.members()[:, units["unit"].to_numpy()], units
    if level == "subtheme":
        placed = np.flatnonzero(run.subthemes.assignment >= 0)
        members = sp.csr_matrix(
            (np.ones(len(placed), np.float32), (placed, run.subthemes.assignment[placed])),
            shape=(run.codes.shape[0], run.subthemes.n_subthemes),
        )
        return members[:, units["unit"].to_numpy()], units
    if level == "family":
        membership = family_matrix([f.members for f in run.families], run.codes.shape[1])
        return _max_over_members(analysis.strong_codes(run.codes), membership), units
    return analysis.strong_codes(run.codes)[:, units["unit"].to_numpy()], units


def level_names(run: LoadedRun, level: str) -> pd.DataFrame:
    """The units a level shows now (unit, label), in their order: merged and hidden themes left out and pinned ones
    first; the sub-themes of hidden themes left out; hidden features left out."""
    if level == "theme":
        return run.theme_info[["theme_id", "label"]].set_axis(["unit", "label"], axis=1)
    if level == "subtheme":
        return run.subtheme_info[["subtheme_id", "label"]].set_axis(["unit", "label"], axis=1)
    if level == "family":
        return pd.DataFrame({"unit": [f.family_id for f in run.families], "label": [f.label for f in run.families]})
    if level == "feature":
        shown = run.features[~run.features["hidden"]]
        return shown[["feature_id", "label"]].set_axis(["unit", "label"], axis=1).reset_index(drop=True)
    raise ValueError(f"level must be one of {LEVELS}, got {level!r}")


def named_units(frame: pd.DataFrame, level: str, units: pd.DataFrame) -> pd.DataFrame:
    """A result over a level's columns (its `feature_id`: a column of the `level_units` matrix, as `compare` gives
    it) with each concept's id (`unit`) and name (`concept`), both read from the same column of `units`: a name never
    slides onto its neighbour when concepts before it are hidden."""
    columns = frame["feature_id"].to_numpy(np.int64)
    names = unit_names(level, units)
    return frame.assign(unit=units["unit"].to_numpy()[columns], concept=[names[int(c)] for c in columns])


def _max_over_members(codes: sp.csr_matrix, membership: sp.csr_matrix) -> sp.csr_matrix:
    """[n_documents, n_groups]: each document's largest activation among each group's features."""
    by_feature, membership = codes.tocsc(), membership.tocsc()  # column slices of CSR would scan every document
    columns = [by_feature[:, membership[:, g].indices].max(axis=1).tocsr() for g in range(membership.shape[1])]
    return sp.hstack(columns, format="csr") if columns else sp.csr_matrix((codes.shape[0], 0), dtype=codes.dtype)


def document_map(vectors: StoredOrInMemory, max_points: int = MAP_POINTS, seed: int = 0) -> pd.DataFrame:
    """A 2-D map of the documents (t-SNE of their embeddings' first 50 principal components): position, x, y.

    Corpora larger than max_points are drawn from a seeded sample, so the map stays quick to compute and to read;
    only the sample's vectors are read when `vectors` are the stored ones. t-SNE runs on one thread: on a busy
    2-core machine its two OpenMP threads waited on each other (600 documents took 114 s instead of 19).
    """
    from sklearn.decomposition import PCA
    from sklearn.manifold import TSNE
    from threadpoolctl import threadpool_limits

    positions = sample_positions(vectors.shape[0], max_points, seed)
    sampled = vector_rows(vectors, positions)
    unit = unit_rows(sampled)
    with threadpool_limits(1):
        reduced = PCA(n_components=min(50, *unit.shape), random_state=seed).fit_transform(unit)
        perplexity = float(min(30, max(2, (len(positions) - 1) // 3)))
        xy = TSNE(2, perplexity=perplexity, init="pca", random_state=seed).fit_transform(reduced)
    return pd.DataFrame({"position": positions, "x": xy[:, 0], "y": xy[:, 1]})


def saved_document_map(
    workspace: Workspace, dataset_id: str, embedding_key: str, progress: ProgressCallback = ignore_progress
) -> pd.DataFrame:
    """The map of a dataset's documents in a vector space (`document_map`), drawn the first time it is asked for and
    kept in the workspace: it does not depend on the run, so every run, session and server of the dataset reuses it."""
    saved = workspace.saved_document_map(dataset_id, embedding_key)
    if len(saved):
        return saved
    progress(Progress("map", 0, 1, "placing the documents"))
    drawn = document_map(workspace.stored_vectors(dataset_id, embedding_key))  # reads only the sample's vectors
    workspace.save_document_map(dataset_id, embedding_key, drawn)
    progress(Progress("map", 1, 1))
    return drawn
