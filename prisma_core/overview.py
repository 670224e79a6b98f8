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
    shown = documents.at(np.concatenate([np.empty(0, np.int64), *tops]))
    names = shown["title"].where(
        shown["title"].fillna("").str.strip() != "", shown["text"].map(lambda t: snippet(t, 60))
    )
    name_of = dict(zip(shown["position"].tolist(), names.tolist(), strict=True))
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
