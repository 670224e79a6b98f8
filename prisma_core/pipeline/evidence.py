"""A run's evidence passages (`prisma_core.concepts.evidence`), the one way the app, the labelling and the report read
them.

Training finds them after the SAE (`find_run_evidence`, its passages read a window of documents at a time); a run
trained before they existed gets them found and stored the first time they are asked for (`feature_evidence`);
documents placed in a run later add their passages (`extend_run_evidence`). A document's own passages with the
features active in each (`document_passage_features`, for highlighting) are encoded when asked: a document's
handful of passages is cheap.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from prisma_core.concepts.evidence import QUOTE_CHARS, passage_activations, top_passages, with_quotes
from prisma_core.embed import EmbedConfig
from prisma_core.pipeline.document_passages import passage_batches, passages
from prisma_core.progress import ProgressCallback, ignore_progress
from prisma_core.reading.runs import LoadedRun
from prisma_core.sae.weights import read_weights
from prisma_core.store import Workspace
from prisma_core.store.location import Location


def find_run_evidence(
    workspace: Workspace,
    run_id: str,
    dataset_id: str,
    weights_dir: Location,
    embed: EmbedConfig,
    progress: ProgressCallback = ignore_progress,
) -> pd.DataFrame:
    """Find and store the strongest passages of every feature of the run (its SAE saved in `weights_dir`) among the
    passages of the dataset's documents, in the run's embedding space; returns them."""
    weights = read_weights(weights_dir)
    n_documents = workspace.dataset(dataset_id).n_documents
    found = top_passages(weights, passage_batches(workspace, dataset_id, None, embed), n_documents, progress=progress)
    workspace.evidence.save(run_id, found, weights.n_latents)
    return found


def feature_evidence(
    workspace: Workspace, run: LoadedRun, progress: ProgressCallback = ignore_progress
) -> pd.DataFrame:
    """The run's evidence passages (feature_id, rank, position, number, start, end, value): as stored, or, for a
    run trained before they were kept, found now and stored."""
    stored = workspace.evidence.of(run.record.run_id)
    if stored is not None:
        return stored
    record = run.record
    return find_run_evidence(workspace, record.run_id, record.dataset_id, run.weights, run.settings.embed, progress)


def feature_quotes(
    workspace: Workspace,
    run: LoadedRun,
    feature_ids: Sequence[int],
    n: int | None = None,
    max_chars: int = QUOTE_CHARS,
) -> pd.DataFrame:
    """The evidence passages of these features (each's `n` strongest, all kept when None) with their document's
    doc_id, title and the passage's text as a `quote` of at most `max_chars` characters on one line, by feature in
    the order given, strongest first."""
    evidence = feature_evidence(workspace, run)
    wanted = pd.DataFrame({"feature_id": np.asarray(feature_ids, np.int32)})
    chosen = wanted.merge(evidence, on="feature_id", how="inner", sort=False)
    if n is not None:
        chosen = chosen[chosen["rank"] < n]
    documents = workspace.documents_at(run.record.dataset_id, np.unique(chosen["position"]))
    return with_quotes(chosen.reset_index(drop=True), documents, max_chars)


def document_passage_features(workspace: Workspace, run: LoadedRun, position: int) -> pd.DataFrame:
    """The passages of one document with the run's features active in each (feature_id, position, number, start,
    end, value: the SAE's strongest per passage), the passages computed when the dataset lacks them."""
    found = passages(workspace, run.record.dataset_id, [position], run.settings.embed)
    return passage_activations(read_weights(run.weights), found)


def extend_run_evidence(
    workspace: Workspace, run_id: str, dataset_id: str, weights_dir: Location, embed: EmbedConfig, first: int
) -> None:
    """Documents from position `first` on, placed in the run, compete for its stored evidence (a run whose evidence
    was never stored is left to find it whole when asked)."""
    stored = workspace.evidence.of(run_id)
    if stored is None:
        return
    weights = read_weights(weights_dir)
    n_documents = workspace.dataset(dataset_id).n_documents
    added = passage_batches(workspace, dataset_id, np.arange(first, n_documents), embed)
    found = top_passages(weights, added, n_documents - first, earlier=stored)
    workspace.evidence.save(run_id, found, weights.n_latents)
