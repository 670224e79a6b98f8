"""What a collection is about, read from a run: its themes with their sizes, families, features and most typical
documents, which documents fit no theme well, and the themes of one document (Home, the Features, Families and
Explore pages and the report show them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from prisma_core.concepts.themes import MAX_SUBTHEMES, MAX_THEMES, NO_THEME
from prisma_core.names import feature_name, snippet, theme_names
from prisma_core.reading.explore import DatasetDocuments
from prisma_core.reading.runs import LoadedRun, themes_of
from prisma_core.store import NamedFamily

N_STRONGEST = 3
"""Features named per sub-theme in its table."""
THEMES_WITHOUT_ANY = 8
"""The number of themes offered to group a run made before Prisma grouped features into themes."""


def theme_name(run: LoadedRun, theme_id: int) -> str:
    """How a theme is named in pickers and charts: "Theme 2: surgery · incision" (plain text, not markdown)."""
    return theme_names(run.theme_info, [theme_id])[int(theme_id)]


def shown_theme(run: LoadedRun, chosen: int | None) -> int:
    """The theme to open: `chosen` while the run shows it, else the first shown (a pinned one, else the largest:
    theme 0); 0 for a run without themes."""
    shown = run.theme_info["theme_id"].tolist()
    if chosen is not None and int(chosen) in shown:
        return int(chosen)
    return int(shown[0]) if shown else 0


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
    """theme_id -> the families it shows, largest first: those whose parent feature belongs to it and whose parent
    fires with a child on at least `min_shared` of its documents (a family whose members meet elsewhere is no
    family of this theme); NO_THEME -> the others."""
    theme_of = dict(zip(run.features["feature_id"].tolist(), run.features["theme_id"].tolist(), strict=True))
    members = run.themes.members().tocsc() if run.themes is not None else None
    active = sp.csc_matrix(run.codes > 0)
    grouped: dict[int, list[NamedFamily]] = {}
    for family in sorted(run.families, key=lambda f: -len(f.members)):
        theme = int(theme_of.get(family.parent, NO_THEME))
        if theme != NO_THEME and members is not None and not _meets_in(active, members[:, theme], family, run):
            theme = NO_THEME
        grouped.setdefault(theme, []).append(family)
    return grouped


def _meets_in(active: sp.csc_matrix, theme_members: sp.csc_matrix, family: NamedFamily, run: LoadedRun) -> bool:
    """Whether the family's parent fires with one of its children on enough of the theme's documents."""
    children = [m for m in family.members if m != family.parent]
    together = active[:, [family.parent]].multiply(active[:, children].sum(axis=1) > 0).multiply(theme_members > 0)
    return together.sum() >= run.settings.families.min_shared


def family_counts(run: LoadedRun) -> dict[int, int]:
    """theme_id -> how many families belong to it, for every theme shown, in the run's order."""
    grouped = families_of_themes(run)
    return {int(t): len(grouped.get(int(t), [])) for t in run.theme_info["theme_id"]}


def theme_families_table(run: LoadedRun, theme_id: int) -> pd.DataFrame:
    """The theme's families, largest first: family, label, features (how many), general concept (its parent)."""
    families = theme_families(run, theme_id)
    label_of = run.features.set_index("feature_id")["label"]
    return pd.DataFrame(
        {
            "family": [f.family_id for f in families],
            "label": [f.label for f in families],
            "features": [len(f.members) for f in families],
            "general concept": [feature_name(f.parent, label_of.get(f.parent)) for f in families],
        },
        columns=["family", "label", "features", "general concept"],
    )


def theme_features(run: LoadedRun, theme_id: int) -> pd.DataFrame:
    """The theme's features, most typical first: feature_id, label, density."""
    ids = list(run.theme_info.set_index("theme_id").at[int(theme_id), "features"])
    return run.features.set_index("feature_id").loc[ids].reset_index()[["feature_id", "label", "density"]]


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


def nested_subthemes(run: LoadedRun, theme_id: int | None = None) -> pd.DataFrame:
    """The sub-themes shown as a level inside their theme (of `theme_id`, or of every theme), in the run's order:
    those of themes split into two or more. A theme's only sub-theme is the theme itself, not a level below it."""
    info = run.subtheme_info
    per_theme = info["theme_id"].map(info["theme_id"].value_counts())
    nested = info[per_theme >= 2]
    return nested if theme_id is None else nested[nested["theme_id"] == theme_id]


def subthemes_table(
    run: LoadedRun, documents: DatasetDocuments, n_examples: int, theme_id: int | None = None
) -> pd.DataFrame:
    """One row per sub-theme (`nested_subthemes`: of `theme_id`, or of every theme): subtheme, theme, label,
    documents, share (of the collection), features (the labels of its N_STRONGEST features, strongest first),
    examples (the titles, else the starts, of its most typical documents)."""
    columns = ["subtheme", "theme", "label", "documents", "share", "features", "examples"]
    label_of = run.features.set_index("feature_id")["label"]
    info = nested_subthemes(run, theme_id)
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


def unfit_documents_table(run: LoadedRun, documents: DatasetDocuments, positions: np.ndarray) -> pd.DataFrame:
    """The documents at `positions` (of those that fit no theme well, `unfit_documents`): doc_id, title, text,
    closest_theme (its name) and closest_share (how much of the document it explains)."""
    shown = documents.at(positions)
    closest = run.themes.strongest()[positions]
    names = theme_names(run.theme_info, closest.tolist())
    return pd.DataFrame(
        {
            "doc_id": shown["doc_id"],
            "title": shown["title"],
            "text": shown["text"],
            "closest_theme": [names[int(t)] for t in closest],
            "closest_share": run.themes.probabilities[positions].max(axis=1),
        }
    )


def document_theme_shares(run: LoadedRun, position: int) -> list[tuple[int, float]]:
    """(theme_id, probability) of every theme the document belongs to, most probable first; [] for a run without
    themes or a document with no active concept."""
    if run.themes is None:
        return []
    probabilities = run.themes.probabilities
    return [(t, float(probabilities[position, t])) for t in themes_of(run.themes.members(), probabilities, position)]


@dataclass(frozen=True)
class ThemeCounts:
    """The numbers of themes and sub-themes a run can be regrouped into, and the number it has now."""

    current: int
    most_themes: int
    most_subthemes: int


def regroup_counts(run: LoadedRun) -> ThemeCounts:
    """At least 2 themes (or sub-themes), at most one per document and the settings' limits; the number now is the
    number of themes shown (at least 2: every theme merged into one regroups into 2); a run without themes starts
    from THEMES_WITHOUT_ANY (or one theme per document for fewer documents)."""
    n_docs = run.codes.shape[0]
    current = max(2, len(run.theme_info)) if run.themes is not None else min(THEMES_WITHOUT_ANY, n_docs)
    return ThemeCounts(current, max(2, min(MAX_THEMES, n_docs)), max(2, min(MAX_SUBTHEMES, n_docs)))
