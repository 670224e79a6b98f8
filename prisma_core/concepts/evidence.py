"""Evidence passages: where in the documents each feature fires. A run's SAE encodes the passages of the documents
(`pipeline.document_passages`: a few sentences each, vectors in the documents' space; a short document is one
passage, its own vector) as it encodes documents, and each feature keeps its strongest passages, at most one per
document so its evidence is varied. The analyst reads them on the feature's card, in a document (which paragraph
carries a concept), in the LLM's labelling prompt and in the report."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from prisma_core.concepts import analysis
from prisma_core.names import snippet
from prisma_core.progress import Progress, ProgressCallback, ignore_progress
from prisma_core.sae.weights import SAEWeights
from prisma_core.store import Passages
from prisma_core.store.evidence import EVIDENCE_COLUMNS

EVIDENCE_PASSAGES = 5
"""Passages kept per feature, each from another document."""
ENCODED_PASSAGES = 8_192
"""Passages encoded at a time: their pre-activations [rows, n_features] are float32 (32 MB at 1,024 features)."""
QUOTE_CHARS = 300
"""The longest quote of a passage shown (a passage is at most 96 tokens, about 500 characters)."""
_CANDIDATE_COLUMNS = ["feature_id", "position", "number", "start", "end", "value"]


def passage_activations(weights: SAEWeights, passages: Passages) -> pd.DataFrame:
    """Every active (passage, feature): feature_id, position, number, start, end, value; the SAE's k per passage."""
    parts = []
    for first in range(0, len(passages), ENCODED_PASSAGES):
        some = passages.take(np.arange(first, min(first + ENCODED_PASSAGES, len(passages))))
        codes = weights.feature_codes(some.vectors).tocoo()
        parts.append(
            pd.DataFrame(
                {
                    "feature_id": codes.col.astype(np.int32),
                    "position": some.position[codes.row],
                    "number": some.number[codes.row],
                    "start": some.start[codes.row],
                    "end": some.end[codes.row],
                    "value": codes.data.astype(np.float32),
                }
            )
        )
    return pd.concat(parts, ignore_index=True) if parts else _no_passages()


def strongest_passages(candidates: pd.DataFrame, n: int = EVIDENCE_PASSAGES) -> pd.DataFrame:
    """Per feature, its `n` strongest passages among `candidates`, at most one per document (its strongest there),
    as EVIDENCE_COLUMNS; ties go to the earlier document and passage, so the choice is the same every time."""
    order = np.lexsort(
        (candidates["number"], candidates["position"], -candidates["value"].to_numpy(), candidates["feature_id"])
    )
    ranked = candidates.iloc[order].drop_duplicates(["feature_id", "position"])
    top = ranked.groupby("feature_id", sort=False).head(n)
    return top.assign(rank=top.groupby("feature_id").cumcount().astype(np.int32))[EVIDENCE_COLUMNS].reset_index(
        drop=True
    )


def top_passages(
    weights: SAEWeights,
    batches: Iterable[Passages],
    n_documents: int,
    n: int = EVIDENCE_PASSAGES,
    progress: ProgressCallback = ignore_progress,
    earlier: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The strongest passages of every feature (`strongest_passages`) over all `batches` of passages (of
    `n_documents` documents in all) and the `earlier` evidence of other documents, holding one batch and the kept
    passages at a time."""
    kept = strongest_passages(_no_passages() if earlier is None else earlier[_CANDIDATE_COLUMNS], n)
    done: set[int] = set()
    progress(Progress("evidence", 0, n_documents, "passages where each concept appears"))
    for batch in batches:
        kept = strongest_passages(pd.concat([kept[_CANDIDATE_COLUMNS], passage_activations(weights, batch)]), n)
        done.update(np.unique(batch.position).tolist())
        progress(Progress("evidence", len(done), n_documents, f"{len(done):,} of {n_documents:,} documents"))
    return kept


def with_quotes(evidence: pd.DataFrame, documents: pd.DataFrame, max_chars: int = QUOTE_CHARS) -> pd.DataFrame:
    """`evidence` rows with their document's doc_id and title and `quote`: the passage's text on one line, cut to
    `max_chars`. `documents`: position, doc_id, title, text of (at least) their documents."""
    read = documents.drop_duplicates("position").set_index("position")
    texts = read["text"].reindex(evidence["position"]).fillna("").astype(str).tolist()
    quotes = [
        snippet(text[start:end], max_chars)
        for text, start, end in zip(texts, evidence["start"], evidence["end"], strict=True)
    ]
    return evidence.assign(
        doc_id=read["doc_id"].reindex(evidence["position"]).astype(str).to_numpy(),
        title=read["title"].reindex(evidence["position"]).fillna("").astype(str).to_numpy(),
        quote=quotes,
    ).reset_index(drop=True)


def passages_carrying(activations: pd.DataFrame, feature_id: int) -> pd.DataFrame:
    """The passages of one document that carry a feature (`activations` as `passage_activations` gives them): where
    it is strong among the passage's own features (`analysis.strong_activations`), as number, start, end, value, in
    the order of the text."""
    largest = activations.groupby("number")["value"].transform("max")
    strong = analysis.strong_activations(activations["value"], largest)
    carrying = activations[strong & (activations["feature_id"] == int(feature_id)).to_numpy()]
    return carrying[["number", "start", "end", "value"]].sort_values("number").reset_index(drop=True)


def marked_pieces(text: str, marked: pd.DataFrame) -> list[tuple[str, bool]]:
    """`text` cut into pieces in order, each with whether it lies in one of the `marked` spans (start, end, in text
    order, not overlapping): what a view highlights."""
    pieces, at = [], 0
    for start, end in zip(marked["start"], marked["end"], strict=True):
        if start > at:
            pieces.append((text[at:start], False))
        pieces.append((text[start:end], True))
        at = end
    if at < len(text):
        pieces.append((text[at:], False))
    return pieces


def _no_passages() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "feature_id": np.zeros(0, np.int32),
            "position": np.zeros(0, np.int64),
            "number": np.zeros(0, np.int32),
            "start": np.zeros(0, np.int64),
            "end": np.zeros(0, np.int64),
            "value": np.zeros(0, np.float32),
        }
    )
