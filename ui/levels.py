"""Explore at every level of the hierarchy (theme, sub-theme, family, feature), and a document's themes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import scipy.sparse as sp
import streamlit as st

from prisma_core.pipeline import LoadedRun, PrismaError
from prisma_core.pipeline.read_model import (
    LEVELS,
    concept_query,
    document_theme_shares,
    level_units,
    theme_name,
    unit_names,
)
from ui.state import loaded_run, revision, workspace
from ui.text import md

LEVEL_NAMES = {"theme": "Themes", "subtheme": "Sub-themes", "family": "Families", "feature": "Features"}
LEVEL_HELP = (
    "Themes are broad subjects, sub-themes the narrower subjects inside them, families groups of related concepts, "
    "features single concepts. A document counts for a theme when it belongs to it, for its own sub-theme, for a "
    "family when any of the family's features is active on it."
)


def level_picker(key: str, default: str = "feature") -> str:
    """Which level of the hierarchy to work at (theme, sub-theme, family or feature)."""
    return st.radio(
        "Work with",
        LEVELS,
        index=LEVELS.index(default),
        format_func=LEVEL_NAMES.__getitem__,
        horizontal=True,
        key=key,
        help=LEVEL_HELP,
    )


@st.cache_resource(show_spinner="Preparing this level…", max_entries=6)
def _units(workspace_path: str, run_id: str, revision: int, level: str) -> tuple[sp.csr_matrix, pd.DataFrame]:
    return level_units(loaded_run(run_id), level)


def units(run: LoadedRun, level: str) -> tuple[sp.csr_matrix, pd.DataFrame]:
    """(documents x units matrix, units: unit, label) of the level, cached per run revision."""
    run_id = run.record.run_id
    return _units(workspace().uri, run_id, revision(run_id), level)


def available_units(run: LoadedRun, level: str) -> tuple[sp.spmatrix, dict[int, str]] | None:
    """(codes, unit names) of a theme or family level; None, said on the page, when the run cannot offer it."""
    try:
        codes, frame = units(run, level)
    except PrismaError as error:
        st.info(md(error))
        return None
    return codes, unit_names(level, frame)


def level_query(run: LoadedRun, level: str) -> tuple[np.ndarray, pd.DataFrame] | None:
    """Must / must-not pickers at a theme or family level. Returns the matching positions and, per match, the
    value of each "must" unit; None when nothing is chosen or the level is unavailable."""
    if (found := available_units(run, level)) is None:
        return None
    codes, names = found
    word = LEVEL_NAMES[level].lower()
    must = st.multiselect("Must be present", list(names), format_func=names.__getitem__, key=f"must_{level}")
    must_not = st.multiselect(
        "Must NOT be present", list(names), format_func=names.__getitem__, key=f"must_not_{level}"
    )
    if not must and not must_not:
        st.caption(f"Choose at least one of the {word}.")
        return None
    positions = concept_query(codes, dict.fromkeys(must, 0.0), dict.fromkeys(must_not, 0.0))
    values = pd.DataFrame({names[c]: codes[positions, c].toarray().ravel().round(4) for c in must})
    return positions, values


def document_theme_caption(run: LoadedRun, position: int) -> str | None:
    """ "Themes of this document: Theme 1: … (72%) · Theme 4: … (31%)" as markdown-safe text, or None."""
    if run.themes is None:
        return None
    shares = document_theme_shares(run, position)
    if not shares:
        return "This document belongs to no theme (no concept is active on it)."
    return "Themes of this document: " + " · ".join(f"{md(theme_name(run, t))} ({share:.0%})" for t, share in shares)
