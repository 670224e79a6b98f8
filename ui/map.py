"""The map of the documents: every document a dot placed near the documents it resembles, coloured by its theme;
hover a dot to read the start of the document."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from prisma_core.explore import document_map
from prisma_core.pipeline import LoadedRun
from ui.state import dataset_documents, revision, run_at, workspace
from ui.text import sample_notice, snippet

NO_THEME_NAME = "(no theme)"

HOVER_CHARS = 200
MAP_CAPTION = (
    "Each dot is a document; documents about similar things sit close together. The colour is the document's "
    "main theme. Hover a dot to read the start of the document."
)


@st.cache_data(show_spinner="Drawing the map of the documents (once per run)…", max_entries=8)
def map_positions(workspace_path: str, run_id: str, dataset_id: str, embedding_key: str) -> pd.DataFrame:
    """position, x, y of the run's documents (a 2-D projection of their embeddings), computed once per run."""
    return document_map(workspace().stored_vectors(dataset_id, embedding_key))  # reads only the sample's vectors


def map_points(run: LoadedRun) -> pd.DataFrame:
    """position, x, y, theme (name), doc_id, title, text (start) for every drawn document."""
    return _map_points(workspace().uri, run.record.run_id, revision(run.record.run_id))


@st.cache_data(show_spinner=False, max_entries=4)
def _map_points(workspace_uri: str, run_id: str, revision: int) -> pd.DataFrame:
    """map_points, kept per run and revision (themes and labels): naming thousands of dots took a large share of
    every rerun of Home."""
    run = run_at(workspace_uri, run_id, revision)
    record = run.record
    points = map_positions(workspace_uri, record.run_id, record.dataset_id, record.embedding_key)
    strongest = run.themes.strongest()
    labels = run.theme_info.set_index("theme_id")["label"]
    names = {t: f"Theme {t}: {labels.get(t)}" if t >= 0 else NO_THEME_NAME for t in set(strongest.tolist())}
    chosen = dataset_documents(record.dataset_id).at(points["position"])
    return points.assign(
        theme=[names[t] for t in strongest[points["position"]]],
        doc_id=chosen["doc_id"].astype(str).to_numpy(),
        title=chosen["title"].fillna("").astype(str).to_numpy(),
        text=[snippet(t, HOVER_CHARS) for t in chosen["text"]],
    )


def map_chart(points: pd.DataFrame) -> alt.Chart:
    """Dots coloured by theme. Vega shows tooltip values as text (its tooltip handler escapes HTML)."""
    order = sorted(points["theme"].unique(), key=lambda n: (n == NO_THEME_NAME, _theme_number(n)))
    return (
        alt.Chart(points, height=560)
        .mark_circle(size=28, opacity=0.75)
        .encode(
            x=alt.X("x:Q", axis=None),
            y=alt.Y("y:Q", axis=None),
            color=alt.Color(
                "theme:N",
                sort=order,
                scale=alt.Scale(scheme="category20"),
                legend=alt.Legend(title="main theme", orient="right", labelLimit=320, symbolLimit=60),
            ),
            tooltip=[
                alt.Tooltip("theme:N", title="theme"),
                alt.Tooltip("doc_id:N", title="document"),
                alt.Tooltip("title:N", title="title"),
                alt.Tooltip("text:N", title="text"),
            ],
        )
        .interactive()
    )


def document_map_view(run: LoadedRun) -> None:
    """The map with its caption (a sample when the corpus is large)."""
    if run.themes is None:
        st.info("This run has no themes yet: group its features into themes on the Features page first.")
        return
    points = map_points(run)
    with st.container(key="document_map"):
        st.altair_chart(map_chart(points), width="stretch")
    n_docs = run.codes.shape[0]
    sampled = f" {sample_notice(len(points), n_docs)}." if len(points) < n_docs else ""
    st.caption(MAP_CAPTION + sampled)


def _theme_number(name: str) -> int:
    try:
        return int(name.split(":")[0].removeprefix("Theme "))
    except ValueError:
        return 10**6
