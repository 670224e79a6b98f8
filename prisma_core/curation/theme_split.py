"""A theme split into its sub-themes, as an analyst's edit (see `prisma_core.curation.edits`): each sub-theme becomes a
theme of its own, with the same documents and features, so the themes of the other documents do not move."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import scipy.sparse as sp

from prisma_core.concepts.themes import Themes


@dataclass(frozen=True)
class Split:
    themes: Themes  # one column more per sub-theme; the split theme's column left empty
    new_theme: dict[int, int]  # sub-theme id -> the id of the theme it became
    features: dict[int, list[int]]  # new theme id -> its features


def split_into_subthemes(
    themes: Themes,
    codes: sp.csr_matrix,
    theme: int,
    members: list[int],
    subthemes: pd.DataFrame,
    assignment: np.ndarray,
) -> Split:
    """Theme `theme` (its features `members`) replaced by one theme per sub-theme in `subthemes` (its rows of
    subtheme_info), numbered from `themes.n_themes` on, largest first.

    A feature's evidence for the theme goes to its sub-theme's theme (a feature no sub-theme lists, to the largest);
    a document's probability of the theme goes to its own sub-theme's theme (`assignment`: each document's
    sub-theme) or, for a document whose sub-theme is in another theme, to the one whose features fire most in it.
    """
    subs = subthemes.sort_values(["n_documents", "subtheme_id"], ascending=[False, True])
    ids = subs["subtheme_id"].to_numpy(np.int64)
    new = themes.n_themes + np.arange(len(ids))
    column = np.zeros(themes.evidence.shape[0], np.int64)  # a feature's sub-theme, as an index into ids
    for j, features in enumerate(subs["features"]):
        column[np.asarray(features, np.int64)] = j
    features_of = {int(new[j]): sorted(int(f) for f in members if column[f] == j) for j in range(len(ids))}

    evidence = _with_columns(themes.evidence, len(ids))
    evidence[np.arange(len(column)), new[column]] = themes.evidence[:, theme]
    evidence[:, theme] = 0.0
    probabilities = _with_columns(themes.probabilities, len(ids))
    choice = _document_choice(codes, column, members, len(ids), ids, assignment)
    probabilities[np.arange(len(choice)), new[choice]] = themes.probabilities[:, theme]
    probabilities[:, theme] = 0.0
    split = replace(themes, evidence=evidence, probabilities=probabilities)
    return Split(split, dict(zip(ids.tolist(), new.tolist(), strict=True)), features_of)


def _with_columns(matrix: np.ndarray, n_more: int) -> np.ndarray:
    return np.hstack([matrix, np.zeros((matrix.shape[0], n_more), matrix.dtype)])


def _document_choice(
    codes: sp.csr_matrix, column: np.ndarray, members: list[int], n: int, ids: np.ndarray, assignment: np.ndarray
) -> np.ndarray:
    """[n_documents] the index (into ids) of the sub-theme each document's share of the split theme goes to."""
    own = np.full(max(int(assignment.max(initial=-1)), int(ids.max())) + 2, -1, np.int64)
    own[ids] = np.arange(n)
    chosen = own[assignment]  # -1: the document's sub-theme is not one of these (a sub-theme -1 reads the last, -1)
    membership = sp.csr_matrix(
        (np.ones(len(members), np.float32), (np.asarray(members, np.int64), column[members])),
        shape=(codes.shape[1], n),
    )
    fired = np.asarray((codes @ membership).todense())
    strongest = np.where(fired.max(axis=1, initial=0.0) > 0, fired.argmax(axis=1), 0)
    return np.where(chosen >= 0, chosen, strongest)
