"""Explore: refract a document or any text into concepts, search by meaning, query by concepts, compare groups,
follow concepts over time, and download everything."""

from collections.abc import Callable

import numpy as np
import pandas as pd
import streamlit as st

from prisma_core.pipeline import PrismaError, document_passage_features
from prisma_core.pipeline.comparison import (
    DATE_BUCKETS,
    MAX_GROUPS,
    MAX_Q,
    column_note,
    group_sizes,
    group_values,
    ordered_columns,
    pooled,
    too_many_values,
)
from prisma_core.pipeline.downloads import features_csv
from prisma_core.pipeline.read_model import (
    concept_query,
    marked_pieces,
    passages_carrying,
    refract_document,
    refract_text,
    search_documents,
    split_strong,
    spreadsheet_csv,
)
from prisma_core.pipeline.report.writer import downloaded_report
from prisma_core.pipeline.settings import ReportConfig
from prisma_core.pipeline.trends import date_columns
from ui import charts, levels
from ui.cards import comes_back_words, feature_options
from ui.compare import compare_groups
from ui.gates import require_dataset, require_run
from ui.glossary import TERMS, explain
from ui.loaders import document_choices, document_vectors, export_folder, metadata
from ui.map import document_map_view, map_positions
from ui.navigation import route_here
from ui.state import dataset_documents, revision, workspace
from ui.text import feature_name, highlighted, md, snippet
from ui.trends import over_time_view

route_here()

TABS = ["Refract", "Search", "Concept query", "Compare groups", "Over time", "Map", "Downloads"]
SHOWN_MATCHES = 200
LARGE_DOWNLOAD_MATCHES = 50_000
"""Matching documents a concept query's download holds at most for a large dataset (their texts are read on click)."""
ID_SUGGESTIONS = 20
COMPARED_KEY = "compared_groups"
"""(column, q threshold, date bucket) of the last comparison drawn on Compare groups: the report's defaults."""
REPORT_COLUMN_KEY = "report_column"
EXPORTS = [  # (button, file in the run's export folder, type)
    ("Activations per document and feature (Parquet)", "activations.parquet", None),
    ("Families (JSON)", "families.json", "application/json"),
    ("Themes (JSON)", "themes.json", "application/json"),
    ("Documents with their themes (Parquet)", "documents.parquet", None),
    ("SAE weights (safetensors)", "sae.safetensors", None),
    ("Run configuration and metrics (JSON)", "config.json", None),
]

dataset = require_dataset()
run = require_run()
ws = workspace()
docs = dataset_documents(dataset.dataset_id)
options = feature_options(run)

st.title("Explore")
explain("activation", "similarity", "lift", "q", "95% range", "trend")


RESULT_COLUMNS = {
    "similarity": st.column_config.NumberColumn(
        "Similarity", format="%.3f", help="How close in meaning to your search: 1 = the same, 0 = unrelated."
    ),
    "doc_id": st.column_config.TextColumn("Document"),
    "title": st.column_config.TextColumn("Title"),
    "text": st.column_config.TextColumn("Text (start)", width="large"),
}


def document_table(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"doc_id": frame["doc_id"], "title": frame["title"], "text": frame["text"].map(snippet)})


CONCEPT_COLUMNS = {
    "feature_id": st.column_config.NumberColumn("Feature", format="%d"),
    "value": st.column_config.NumberColumn("Strength", format="%.4f"),
    "label": st.column_config.TextColumn("Label", width="large"),
    "comes_back": st.column_config.TextColumn("Comes back", help=TERMS["trainings compared"]),
    "found_in": None,
}


def show_concepts(frame: pd.DataFrame) -> None:
    if frame.empty:
        st.info("No feature is active on this text.")
        return
    frame, weak = split_strong(frame.assign(comes_back=comes_back_words(run, frame["found_in"])))
    st.markdown(f"**The {len(frame)} concepts that matter most here**, strongest first")
    st.altair_chart(charts.feature_bars(frame), width="stretch")
    st.dataframe(
        frame,
        hide_index=True,
        key="refraction_table",
        column_config=CONCEPT_COLUMNS,
    )
    if not weak.empty:
        with st.expander(f"{len(weak)} weaker concepts (less than a quarter of the strongest)"):
            st.dataframe(
                weak,
                hide_index=True,
                key="refraction_weak_table",
                column_config=CONCEPT_COLUMNS,
            )


def refract_tab() -> None:
    st.markdown("The concepts active in one document, strongest first: the document “refracted” into features.")
    mode = st.radio("What to refract", ["A document", "Your own text"], horizontal=True, key="refract_mode")
    if mode == "A document":
        document = typed_document() if docs.large else picked_document()
        if document is None:
            return
        position = int(document["position"])
        if (themes_line := levels.document_theme_caption(run, position)) is not None:
            st.caption(themes_line)
        concepts = refract_document(run, position)
        show_concepts(concepts)
        where_in_document(position, str(document["text"]), concepts)
        return
    text = st.text_area("Text", key="refract_text", height=160, placeholder="Paste or type any text…")
    if st.button("Refract", key="refract_button", type="primary") and text.strip():
        with st.spinner("Embedding the text…"):
            try:
                st.session_state["refracted"] = (run.record.run_id, text, refract_text(run, text))
            except PrismaError as error:
                st.error(md(error))
    stored = st.session_state.get("refracted")
    if stored and stored[0] == run.record.run_id and stored[1] == text:
        show_concepts(stored[2])


def where_in_document(position: int, text: str, concepts: pd.DataFrame) -> None:
    """The document's text with the passages that carry a concept it holds highlighted: which paragraph says it."""
    if concepts.empty:
        with st.expander("Document text"):
            st.text(text)
        return
    st.markdown("**Where in the document**: pick one of its concepts to highlight the passages that carry it")
    names = dict(zip(concepts["feature_id"], concepts["label"], strict=True))
    feature = st.selectbox(
        "Concept to highlight",
        list(names),
        format_func=lambda f: feature_name(f, names[f]),
        key=f"refract_highlight_{position}",
    )
    try:
        with st.spinner("Reading the document's passages…"):
            carrying = passages_carrying(document_passage_features(ws, run, position), feature)
    except PrismaError as error:
        st.error(md(error))
        return
    if carrying.empty:
        st.caption("No single passage carries this concept: it comes from the document as a whole.")
    else:
        many = "passage carries" if len(carrying) == 1 else f"{len(carrying)} passages carry"
        st.caption(f"Highlighted: the {many} it (strongest {carrying['value'].max():.3f}).")
    with st.container(border=True, height=420):
        st.markdown(highlighted(marked_pieces(text, carrying)))


def picked_document() -> pd.Series:
    """A small dataset's document, chosen in a picker of every document."""
    choices = document_choices(ws.uri, dataset.dataset_id, dataset.n_documents)
    position = st.selectbox("Document", range(docs.n_documents), format_func=choices.__getitem__, key="refract_doc")
    return docs.frame.iloc[position]


def typed_document() -> pd.Series | None:
    """A large dataset's document, found by the id typed (a list of every document would be too long to send)."""
    doc_id = st.text_input(
        "Document id",
        key="refract_doc_id",
        placeholder=f"e.g. {docs.at([0])['doc_id'].iloc[0]}",
        help=f"This dataset has {docs.n_documents:,} documents: type the id of the one to refract, or find it on "
        "the Search tab.",
    ).strip()
    if not doc_id:
        st.caption("Type a document id to refract it.")
        return None
    found = docs.with_id(doc_id)
    if not found.empty:
        return found.iloc[0]
    similar = ws.doc_ids_starting(dataset.dataset_id, doc_id, ID_SUGGESTIONS)
    st.warning(
        f"No document has the id “{md(doc_id)}”."
        + (f" Ids starting like it: {md(', '.join(similar))}." if similar else ""),
        icon=":material/search_off:",
    )
    return None


def search_tab() -> None:
    st.markdown("Find documents by meaning, not by exact words (nearest neighbours in embedding space).")
    left, right = st.columns([4, 1])
    query = left.text_input("Search documents", key="search_query", placeholder="e.g. shortness of breath at night")
    limit = right.number_input("Results", 1, 100, 10, key="search_limit")
    if query.strip():
        try:
            vectors = document_vectors(ws.uri, dataset.dataset_id, dataset.n_documents, run.record.embedding_key)
            hits = search_documents(run, query, docs, vectors, int(limit))
        except PrismaError as error:
            st.error(md(error))
            return
        table = document_table(hits)
        table.insert(0, "similarity", (1 - hits["distance"]).round(3))
        st.dataframe(table, hide_index=True, key="search_results", column_config=RESULT_COLUMNS)
        if hits.empty:
            return
        chosen = st.selectbox(
            "Read a whole document",
            range(len(hits)),
            format_func=lambda i: (
                f"{i + 1}. {hits['doc_id'].iloc[i]} · {snippet(hits['title'].iloc[i] or hits['text'].iloc[i], 80)}"
            ),
            key="search_read",
        )
        with st.container(border=True, height=360):
            st.text(hits["text"].iloc[chosen])


def thresholds(features: list[int], kind: str) -> dict[int, float]:
    """One threshold per chosen feature (0 = active at all)."""
    chosen = {}
    columns = st.columns(max(1, min(len(features), 4)))
    for index, feature in enumerate(features):
        row = run.features.set_index("feature_id").loc[feature]
        chosen[feature] = columns[index % len(columns)].number_input(
            f"#{feature}: {'present above' if kind == 'must' else 'absent unless above'}",
            0.0,
            float(row["max_activation"]) or 1.0,
            0.0,
            format="%.3f",
            help=f"The feature counts as present above this strength (0: present at all; its strongest is "
            f"{row['max_activation']:.3f}).",
            key=f"threshold_{kind}_{feature}",
        )
    return chosen


def concept_query_tab() -> None:
    st.markdown(
        "Documents where some concepts are present **and** others are absent, e.g. *bronchiolitis* but not "
        "*suspected*: something keyword search cannot express."
    )
    level = levels.level_picker("query_level")
    if level != "feature":
        level_matches(levels.level_query(run, level))
        return
    names = options.__getitem__
    # select_all=False: Enter in the search box picks the highlighted feature, never "Select all matches"
    must = st.multiselect("Must be present", list(options), format_func=names, key="must", select_all=False)
    must_not = st.multiselect("Must be absent", list(options), format_func=names, key="must_not", select_all=False)
    if not must and not must_not:
        st.caption("Choose at least one feature.")
        return
    must_thresholds = thresholds(must, "must")
    not_thresholds = thresholds(must_not, "not")
    positions = concept_query(run.codes, must_thresholds, not_thresholds)
    st.metric("Matching documents", f"{len(positions):,}", help=f"of {docs.n_documents:,} documents")
    if not len(positions):
        return
    strengths = pd.DataFrame(
        {f"strength {feature_name(f, '')}": run.codes[positions, f].toarray().ravel().round(4) for f in must}
    )
    table = document_table(docs.at(positions[:SHOWN_MATCHES])).join(strengths.head(SHOWN_MATCHES))
    st.dataframe(table, hide_index=True, key="query_results", column_config=RESULT_COLUMNS)
    matches_download(positions, strengths)


def matches_download(positions: np.ndarray, values: pd.DataFrame) -> None:
    """The matching documents (text, `values`, metadata) as CSV, read when the button is clicked; for a large dataset
    the first LARGE_DOWNLOAD_MATCHES of them."""
    kept = min(len(positions), LARGE_DOWNLOAD_MATCHES) if docs.large else len(positions)
    if len(positions) > SHOWN_MATCHES:
        held = "them all" if kept == len(positions) else f"the first {kept:,}"
        st.caption(f"Showing {SHOWN_MATCHES} of {len(positions):,}; the download holds {held}.")
    documents, workspace_uri, dataset_id, n_documents = docs, ws.uri, dataset.dataset_id, dataset.n_documents

    def make() -> str:
        full = documents.at(positions[:kept])[["doc_id", "title", "text"]]
        extra = metadata(workspace_uri, dataset_id, n_documents).iloc[positions[:kept]].reset_index(drop=True)
        return spreadsheet_csv(full.join(values.head(kept)).join(extra))

    download("Download matching documents (CSV)", make, "matching_documents.csv", "text/csv")


def download(label: str, make: Callable[[], bytes | str], file_name: str, mime: str | None) -> None:
    """The file is made on click; the click does not rerun the page, so a rerun cannot retire the file before the
    browser fetches it, and the analyst's view stays as it was."""
    key = "download_" + file_name.split(".")[0]
    st.download_button(label, make, file_name=file_name, mime=mime, key=key, on_click="ignore")


def level_matches(found: tuple[np.ndarray, pd.DataFrame] | None) -> None:
    """The documents of a theme- or family-level concept query, with the same table and download as features."""
    if found is None:
        return
    positions, values = found
    st.metric("Matching documents", f"{len(positions):,}", help=f"of {docs.n_documents:,} documents")
    if not len(positions):
        return
    shown = document_table(docs.at(positions[:SHOWN_MATCHES]))
    table = pd.concat([shown, values.head(SHOWN_MATCHES).reset_index(drop=True)], axis=1)
    st.dataframe(table, hide_index=True, key="query_results")
    matches_download(positions, pd.DataFrame(index=values.index))


def grouping(name: str, column: pd.Series) -> pd.Series:
    """Dates are bucketed; past MAX_GROUPS groups, the smallest are pooled as "(other)", listed last."""
    bucket = "year"
    if pd.api.types.is_datetime64_any_dtype(column):
        bucket = st.selectbox("Group dates by", list(DATE_BUCKETS), key="date_bucket")
    elif too_many_values(column):
        st.warning(
            f"“{md(name)}” has {column.nunique():,} different values for {len(column):,} documents, nearly one per "
            "document (like an id or a DOI): groups that small say nothing about their concepts. Choose a column "
            "such as a category, a source or a date.",
            icon=":material/warning:",
        )
    groups = group_values(column, bucket)
    n_groups = groups.nunique()
    if n_groups > MAX_GROUPS:
        st.caption(f"{n_groups:,} different values: the {MAX_GROUPS - 1} largest groups are compared, the rest pooled.")
    return pooled(groups)


def compare_tab() -> None:
    st.markdown("How often each concept appears in each group, and which concepts set a group apart.")
    frame = metadata(ws.uri, dataset.dataset_id, dataset.n_documents)
    if frame.empty or not len(frame.columns):
        st.info("This dataset has no metadata columns (such as a category, date or source) to compare groups by.")
        return
    column = st.selectbox(
        "Compare groups of",
        ordered_columns(frame),
        format_func=lambda c: f"{c} ({column_note(frame[c])})",
        key="group_column",
    )
    groups = grouping(column, frame[column])
    level = levels.level_picker("compare_level")
    sizes = group_sizes(groups).rename_axis("group").reset_index(name="documents")
    st.dataframe(sizes, hide_index=True, key="group_sizes", column_config={"group": "Group", "documents": "Documents"})
    compare_groups(run, column, groups, level, sizes["group"].tolist())
    # kept beyond this tab's widgets (whose state goes when another tab is drawn): the report starts from them
    st.session_state[COMPARED_KEY] = (
        column,
        st.session_state.get("max_q", MAX_Q),
        st.session_state.get("date_bucket", "year"),
    )


def over_time_tab() -> None:
    st.markdown("How often each concept appears in each period of a date column, and which rise or fall beyond chance.")
    over_time_view(run, metadata(ws.uri, dataset.dataset_id, dataset.n_documents))


def downloads_tab() -> None:
    st.markdown("Everything this run produced, to use elsewhere.")
    # The files are made when a button is clicked, outside the script run: everything they depend on is read here.
    uri, run_id = ws.uri, run.record.run_id
    run_revision = revision(run_id)

    def exported(name: str) -> bytes:
        return (export_folder(uri, run_id, run_revision) / name).read_bytes()

    report_download()
    st.markdown("**Everything as data files**")
    download("Labels (CSV)", lambda: features_csv(export_folder(uri, run_id, run_revision)), "labels.csv", "text/csv")
    for label, name, mime in EXPORTS:
        download(label, lambda name=name: exported(name), name, mime)
    if date_columns(metadata(ws.uri, dataset.dataset_id, dataset.n_documents)):
        download("Concepts over time, every level (CSV)", lambda: exported("trends.csv"), "trends.csv", "text/csv")
    st.caption("Matching documents of a concept query download from the Concept query tab.")


def report_download() -> None:
    """The report: one HTML file to hand over, comparing the groups of a column the analyst picks (the one chosen
    on Compare groups by default, at the q threshold chosen there)."""
    st.markdown(
        "**A report to share**: one web page file with the themes, the map of the documents, the groups of a column "
        "compared with their statistics, the themes over time (for a dataset with dates), how reliable the concepts "
        "are and the settings that produced them. It opens in any browser, without Prisma and without a network "
        "connection."
    )
    frame = metadata(ws.uri, dataset.dataset_id, dataset.n_documents)
    columns = ordered_columns(frame)
    compared, max_q, date_bucket = st.session_state.get(COMPARED_KEY, (None, MAX_Q, "year"))
    left, right = st.columns(2)
    column = None
    if columns:
        if st.session_state.get(REPORT_COLUMN_KEY) not in columns:  # first drawn: the column compared last
            st.session_state[REPORT_COLUMN_KEY] = compared if compared in columns else columns[0]
        column = left.selectbox(
            "Groups the report compares",
            columns,
            format_func=lambda c: f"{c} ({column_note(frame[c])})",
            key=REPORT_COLUMN_KEY,
        )
    else:
        left.caption("This dataset has no metadata column to compare groups by: the report leaves the comparison out.")
    with right:
        level = levels.level_picker("report_level", default="theme")
    dated = st.session_state.get("trend_column")
    dated = dated if dated in date_columns(frame) else None
    config = ReportConfig(
        column=column,
        level=level,
        max_q=max_q,
        date_bucket=date_bucket,
        date_column=dated,
        period=st.session_state.get(f"trend_period_{dated}", "auto") if dated else "auto",
    )
    points = map_positions(run)  # the app's map once drawn; until then the report draws its own
    workspace_now, run_now = ws, run
    download(
        "Report (HTML, one file to share)",
        lambda: downloaded_report(workspace_now, run_now, config, points),
        "prisma_report.html",
        "text/html",
    )


tabs = st.tabs(TABS, key="explore_tab", on_change="rerun")


def map_tab() -> None:
    document_map_view(run)


for tab, draw in zip(
    tabs, (refract_tab, search_tab, concept_query_tab, compare_tab, over_time_tab, map_tab, downloads_tab), strict=True
):
    if tab.open:
        with tab:
            draw()
