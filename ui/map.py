"""The map of the documents: every document a dot placed near the documents it resembles, coloured by its theme;
hover a dot to read the start of the document."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from prisma_core.pipeline import LoadedRun
from prisma_core.pipeline.read_model import (
    NO_THEME_COLOUR,
    NO_THEME_NAME,
    saved_document_map,
    theme_colour,
    theme_names,
    unit_name,
)
from ui.progress import job_panel
from ui.state import dataset_documents, job_registry, revision, run_at, workspace
from ui.text import sample_notice, snippet

HOVER_CHARS = 200
MAP_CAPTION = (
    "Each dot is a document; documents about similar things sit close together. The colour is the document's "
    "main theme. Hover a dot to read its sub-theme (the narrower subject inside the theme) and the start of the "
    "document."
)


@st.cache_resource(show_spinner=False)
def _drawn_maps() -> dict[tuple[str, str, str, int], pd.DataFrame]:
    """(workspace, dataset, vector space, documents) -> position, x, y of the maps read from the store (drawn ones
    only)."""
    return {}


def map_job_key(dataset_id: str, embedding_key: str) -> str:
    return f"map:{dataset_id}:{embedding_key}"


def map_positions(run: LoadedRun) -> pd.DataFrame | None:
    """position, x, y of the run's documents on the map, once drawn. The first time a dataset's map is asked for
    it is drawn in the background (t-SNE takes a while: up to minutes on a busy machine) and None is returned, so
    the page shows at once; every later view, session and server reads the map the workspace keeps."""
    ws, record = workspace(), run.record
    key = (ws.uri, record.dataset_id, record.embedding_key, run.codes.shape[0])  # documents added: drawn again
    drawn = _drawn_maps()
    if key not in drawn:
        saved = ws.saved_document_map(record.dataset_id, record.embedding_key)
        if saved.empty:
            return None
        drawn[key] = saved
    return drawn[key]


def draw_in_background(run: LoadedRun) -> None:
    """The map's drawing job: started once (its panel shows while it runs; the page shows the map when it ends)."""
    record, ws = run.record, workspace()
    job_key = map_job_key(record.dataset_id, record.embedding_key)
    job = job_registry().get(job_key)
    failed = job is not None and job.error is not None
    if job is None or (not job.running and not failed) or (failed and st.button("Draw the map again", key=job_key)):
        job_registry().start(
            job_key,
            "Drawing the map of the documents",
            lambda progress: saved_document_map(ws, record.dataset_id, record.embedding_key, progress),
        )
    st.caption("The map of the documents is drawn once per collection (a minute or two); it shows here when ready.")
    job_panel(job_key)


def map_points(run: LoadedRun) -> pd.DataFrame | None:
    """position, x, y, theme (name), doc_id, title, text (start) for every drawn document; None until the map is
    drawn."""
    if map_positions(run) is None:
        return None
    return _map_points(workspace().uri, run.record.run_id, revision(run.record.run_id))


@st.cache_data(show_spinner=False, max_entries=4)
def _map_points(workspace_uri: str, run_id: str, revision: int) -> pd.DataFrame:
    """map_points, kept per run and revision (themes and labels): naming thousands of dots took a large share of
    every rerun of Home."""
    run = run_at(workspace_uri, run_id, revision)
    record = run.record
    points = map_positions(run)
    strongest = run.themes.strongest()
    names = theme_names(run.theme_info, strongest.tolist())
    chosen = dataset_documents(record.dataset_id).at(points["position"])
    return points.assign(
        theme=[names[t] for t in strongest[points["position"]]],
        subtheme=_subtheme_names(run)[points["position"]],
        doc_id=chosen["doc_id"].astype(str).to_numpy(),
        title=chosen["title"].fillna("").astype(str).to_numpy(),
        text=[snippet(t, HOVER_CHARS) for t in chosen["text"]],
    )


def _subtheme_names(run: LoadedRun) -> np.ndarray:
    """[n_documents] each document's sub-theme as "Sub-theme 4: knee · arthroscopy", "none" without one."""
    if run.subthemes is None:
        return np.full(run.codes.shape[0], "none", dtype=object)
    labels = run.subtheme_info.set_index("subtheme_id")["label"]
    names = np.asarray(
        ["none", *[unit_name("subtheme", s, labels.get(s)) for s in range(run.subthemes.n_subthemes)]], object
    )
    return names[run.subthemes.assignment + 1]


def map_chart(points: pd.DataFrame) -> alt.Chart:
    """Dots coloured by theme. Vega shows tooltip values as text (its tooltip handler escapes HTML)."""
    order = sorted(points["theme"].unique(), key=lambda n: (n == NO_THEME_NAME, _theme_number(n)))
    colours = [NO_THEME_COLOUR if name == NO_THEME_NAME else theme_colour(_theme_number(name)) for name in order]
    return (
        alt.Chart(points, height=560)
        .mark_circle(size=28, opacity=0.75)
        .encode(
            x=alt.X("x:Q", axis=None),
            y=alt.Y("y:Q", axis=None),
            color=alt.Color(
                "theme:N",
                sort=order,
                scale=alt.Scale(domain=order, range=colours),
                legend=alt.Legend(title="main theme", orient="right", labelLimit=320, symbolLimit=60),
            ),
            tooltip=[
                alt.Tooltip("theme:N", title="theme"),
                alt.Tooltip("subtheme:N", title="sub-theme"),
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
    if points is None:
        draw_in_background(run)
        return
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
