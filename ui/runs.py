"""A run's quality where a run is shown (its name and judgement in words come from prisma_core.reading.run_quality)."""

from __future__ import annotations

import streamlit as st

from prisma_core.pipeline import RunRecord
from prisma_core.pipeline.read_model import detail_in_words, mostly_never_firing, overfitting, quality_words
from ui.text import md


def run_quality_note(run: RunRecord) -> None:
    """The run's quality in a sentence, and an overfitting warning when there is one (where a run is shown)."""
    detail = detail_in_words(run)
    if detail is not None:
        st.caption(f"Quality: {quality_words(run)}. The run {detail}.")
    if (dead := mostly_never_firing(run)) is not None:
        st.warning(
            f"{dead:.0%} of this run's features never fire on any document: the documents differ too little for "
            "this many features, so the few that fire say little. Check that the text column holds the documents' "
            "text, not a category or an id (Datasets page), or train with fewer features.",
            icon=":material/warning:",
        )
    warning = overfitting(run)
    if warning:
        st.warning(md(warning), icon=":material/warning:")
