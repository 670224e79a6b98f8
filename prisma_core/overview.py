"""What a collection is about, read from a run: its themes with their sizes, families, features and most typical
documents (Home, the Features page and the report show them)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import scipy.sparse as sp

from prisma_core.explore import DatasetDocuments
from prisma_core.names import snippet
from prisma_core.runs import LoadedRun
from prisma_core.store import NamedFamily
from prisma_core.themes import NO_THEME

N_STRONGEST = 3
"""Features named per sub-theme in its table."""


def theme_documents(run: LoadedRun, theme_id: int, n: int, members: sp.csc_matrix | None = None) -> pd.DataFrame:
    """The n documents most clearly about the theme (highest probability among its members): position, share.
    members: run.themes.members() as CSC, when the caller already has it."""
    members = (run.themes.members().tocsc() if members is None else members)[:, theme_id].toarray().ravel() > 0
    probability = run.themes.probabilities[:, theme_id]
    positions = np.flatnonzero(members)
    order = positions[np.argsort(-probability[positions], kind="stable")][:n]
    return pd.DataFrame({"position": order, "share": probability[order]})


def theme_families(run: LoadedRun, theme_id: int) -> list[NamedFamily]:
    """The families whose parent feature belongs to the theme, largest first."""
    return families_of_themes(run).get(theme_id, [])


def families_of_themes(run: LoadedRun) -> dict[int, list[NamedFamily]]:
    """theme_id -> the families whose parent feature belongs to it, largest first (one pass over the families)."""
    theme_of = dict(zip(run.features["feature_id"].tolist(), run.features["theme_id"].tolist(), strict=True))
    grouped: dict[int, list[NamedFamily]] = {}
    for family in sorted(run.families, key=lambda f: -len(f.members)):
        grouped.setdefault(int(theme_of.get(family.parent, NO_THEME)), []).append(family)
    return grouped


def themes_table(run: LoadedRun, documents: DatasetDocuments, n_examples: int) -> pd.DataFrame:
    """One row per theme (in run.theme_info order): theme, label, documents, share, families, features, examples
    (the titles, else the starts, of its `n_examples` most typical documents)."""
    members = run.themes.members().tocsc()
    tops = [theme_documents(run, int(t), n_examples, members)["position"] for t in run.theme_info["theme_id"]]
    name_of = _document_names(documents, np.concatenate([np.empty(0, np.int64), *tops]))
    n_docs = max(run.codes.shape[0], 1)
    rows = []
    for info, top in zip(run.theme_info.itertuples(), tops, strict=True):
        rows.append(
            {
                "theme": int(info.theme_id),
                "label": info.label,
                "documents": int(info.n_documents),
                "share": info.n_documents / n_docs,
                "families": len(theme_families(run, int(info.theme_id))),
                "features": len(info.features),
                "examples": " · ".join(str(name_of[p]) for p in top),
            }
        )
    return pd.DataFrame(rows, columns=["theme", "label", "documents", "share", "families", "features", "examples"])


def subtheme_documents(run: LoadedRun, subtheme_id: int, n: int) -> pd.DataFrame:
    """The n documents most clearly about the sub-theme (its members with the strongest vote of their features for
    it): position, score."""
    positions = np.flatnonzero(run.subthemes.assignment == subtheme_id)
    score = np.asarray(run.codes[positions] @ run.subthemes.evidence[:, subtheme_id]).ravel()
    order = np.argsort(-score, kind="stable")[:n]
    return pd.DataFrame({"position": positions[order], "score": score[order]})


def subthemes_table(
    run: LoadedRun, documents: DatasetDocuments, n_examples: int, theme_id: int | None = None
) -> pd.DataFrame:
    """One row per sub-theme (of `theme_id`, or of every theme): subtheme, theme, label, documents, share (of the
    collection), features (the labels of its N_STRONGEST features, strongest first), examples (the titles, else the
    starts, of its most typical documents)."""
    columns = ["subtheme", "theme", "label", "documents", "share", "features", "examples"]
    label_of = run.features.set_index("feature_id")["label"]
    info = run.subtheme_info
    if theme_id is not None:
        info = info[info["theme_id"] == theme_id]
    if info.empty:
        return pd.DataFrame(columns=columns)
    tops = [subtheme_documents(run, int(s), n_examples)["position"] for s in info["subtheme_id"]]
    name_of = _document_names(documents, np.concatenate([np.empty(0, np.int64), *tops]))
    n_docs = max(run.codes.shape[0], 1)
    rows = [
        {
            "subtheme": int(row.subtheme_id),
            "theme": int(row.theme_id),
            "label": row.label,
            "documents": int(row.n_documents),
            "share": row.n_documents / n_docs,
            "features": " · ".join(str(label_of.get(f, f"feature {f}")) for f in row.features[:N_STRONGEST]),
            "examples": " · ".join(str(name_of[p]) for p in top),
        }
        for row, top in zip(info.itertuples(), tops, strict=True)
    ]
    return pd.DataFrame(rows, columns=columns)


def _document_names(documents: DatasetDocuments, positions: np.ndarray) -> dict[int, str]:
    """position -> the document's title, else the start of its text."""
    shown = documents.at(positions)
    names = shown["title"].where(
        shown["title"].fillna("").str.strip() != "", shown["text"].map(lambda t: snippet(t, 60))
    )
    return dict(zip(shown["position"].tolist(), names.tolist(), strict=True))


def unfit_documents(run: LoadedRun) -> np.ndarray:
    """Positions of the documents that fit no theme well (see `Themes.fits`), least clear first."""
    positions = np.flatnonzero(~run.themes.fits())
    return positions[np.argsort(run.themes.probabilities[positions].max(axis=1), kind="stable")]


def coverage_sentence(run: LoadedRun) -> str:
    """How many documents fit no theme well, in plain words ("312 documents (4.1%) fit no theme well")."""
    n_docs = run.codes.shape[0]
    unfit = int((~run.themes.fits()).sum())
    if unfit == 0:
        return "Every document fits a theme well."
    noun = "document" if unfit == 1 else "documents"
    verb = "fits" if unfit == 1 else "fit"
    share = unfit / max(n_docs, 1)
    return f"{unfit:,} {noun} ({share:.1%}) {verb} no theme well: no theme clearly wins over the others."
