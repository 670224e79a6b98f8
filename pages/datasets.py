"""Datasets: upload files, pick the text/title/id columns, see what was read; rename and delete datasets; add
documents to one."""

from dataclasses import asdict
from pathlib import PurePosixPath

import pandas as pd
import streamlit as st

from prisma_core import pipeline
from prisma_core.pipeline import PrismaError
from prisma_core.pipeline.intake import (
    CHECKED_ROWS,
    SUPPORTED_EXTENSIONS,
    DateOrder,
    Source,
    ambiguous_date_columns,
    guess_id_column,
    guess_text_column,
    guess_title_column,
    text_column_problem,
    to_dates,
)
from prisma_core.pipeline.settings import IngestConfig
from ui.growth import add_documents_section
from ui.loaders import upload_preview
from ui.navigation import route_here
from ui.state import PAGES, current_dataset, select, workspace
from ui.text import md

route_here()

TEXT_FORMATS = (".txt", ".md", ".pdf", ".docx")  # one document per file: no columns to choose
NO_TITLE = "(none)"
ROW_IDS = "(row numbers)"
REPORT_KEY = "ingest_report"
CREATED_KEY = "created_upload"
PREVIEW_ROWS = 20

st.title("Datasets")
st.markdown(
    "A dataset is a collection of documents. Upload one or several files: tables "
    "(CSV, TSV, Excel, JSON, JSON lines, Parquet: one row per document), or text files (TXT, Markdown, PDF, "
    "Word: one document per file), or a ZIP of any of these. Other table columns are kept as metadata, for "
    "filtering and comparing groups on the Explore page."
)


def column_choice(frame: pd.DataFrame) -> IngestConfig | None:
    """Text/title/id pickers, the text column pre-selected, and a warning when the chosen text column looks like a
    category or an id (`frame`: the first rows); None (with the reason shown) when no column holds text."""
    columns = [str(column) for column in frame.columns]
    try:
        guess = guess_text_column(frame)
    except PrismaError as error:
        st.error(f"{md(error)}. Prisma needs a column of text, such as notes or abstracts.", icon=":material/error:")
        return None
    left, middle, right = st.columns(3)
    text_column = left.selectbox(
        "Text column", columns, index=columns.index(guess), key="text_column", help="The text Prisma analyses."
    )
    title_options = [NO_TITLE, *columns]
    title_column = middle.selectbox(
        "Title column (optional)",
        title_options,
        index=title_options.index(str(guess_title_column(frame) or NO_TITLE)),
        key="title_column",
        help="A short name shown next to each document. A column named title or headline is picked for you.",
    )
    id_options = [ROW_IDS, *columns]
    id_column = right.selectbox(
        "Id column (optional)",
        id_options,
        index=id_options.index(guess_id_column(frame) or ROW_IDS),
        key="id_column",
        help="Row numbers when none is chosen. Repeated ids get a #2, #3… suffix.",
    )
    if problem := text_column_problem(frame[text_column], text_column):
        st.warning(md(problem), icon=":material/warning:")
    return IngestConfig(
        text_column=text_column,
        title_column=None if title_column == NO_TITLE else title_column,
        id_column=None if id_column == ROW_IDS else id_column,
        date_order=date_order(frame),
    )


def date_order(frame: pd.DataFrame) -> DateOrder:
    """Asks how the dates are written when a column's first rows cannot tell (every day 12 or less): "auto" when
    none is ambiguous or the analyst does not answer (the column is then kept as text)."""
    ambiguous = ambiguous_date_columns(frame)
    if not ambiguous:
        return "auto"
    example = str(frame[ambiguous[0]].dropna().iloc[0])
    readings = {order: to_dates(pd.Series([example]), order).iloc[0] for order in ("day_first", "month_first")}
    named = ", ".join(f"“{column}”" for column in ambiguous)
    answer = st.radio(
        f"How are the dates in {md(named)} written?",
        list(readings),
        index=None,
        format_func=lambda order: (
            f"{order.replace('_', ' ').capitalize()}: {example} is {readings[order].day} {readings[order]:%B %Y}"
        ),
        key="date_order",
        horizontal=True,
        help="Every day in the first rows is 12 or less, so these dates could be read either way. Unanswered, the "
        "column is kept as text rather than as dates.",
    )
    return answer or "auto"


def upload_section() -> None:
    files = st.file_uploader(
        "Files",
        type=[extension.lstrip(".") for extension in SUPPORTED_EXTENSIONS],
        accept_multiple_files=True,
        key="upload",
    )
    if not files:
        return
    sources = [(file.name, file.getvalue()) for file in files]
    try:
        frame = upload_preview(tuple(file.file_id for file in files), sources, CHECKED_ROWS)
    except PrismaError as error:
        st.error(md(error), icon=":material/error:")
        return
    st.markdown(f"**Preview** (first {min(len(frame), PREVIEW_ROWS)} rows)")
    st.dataframe(frame.head(PREVIEW_ROWS), hide_index=True, key="preview_table")
    only_text_files = all(PurePosixPath(name).suffix.lower() in TEXT_FORMATS for name, _ in sources)
    if only_text_files:
        st.caption("Each file becomes one document; its name is the id and title.")
        config = IngestConfig()
    else:
        config = column_choice(frame)
        if config is None:
            return
    name = st.text_input("Dataset name", value=PurePosixPath(files[0].name).stem, key="dataset_name")
    if st.button("Create dataset", type="primary", key="create_dataset"):
        upload = (tuple(file.file_id for file in files), name, repr(config))
        create(sources, name, config, upload)


def create(sources: list[Source], name: str, config: IngestConfig, upload: tuple) -> None:
    """Store the upload as a dataset, once: a second click on the same upload (same files, name and columns), even
    one that lands while the first is still storing, shows the dataset already created instead of a copy."""
    created = st.session_state.get(CREATED_KEY)
    stored = {d.dataset_id for d in workspace().datasets()}
    if created is not None and created[0] == upload and (created[1] is None or created[1] in stored):
        st.info("This upload is already stored as a dataset (see below).", icon=":material/info:")
        return
    st.session_state[CREATED_KEY] = (upload, None)  # set first: a rerun by a second click sees it
    try:
        with st.spinner("Reading and storing the documents…"):
            dataset_id, report = pipeline.ingest(workspace(), sources, name, config)
    except PrismaError as error:
        st.session_state.pop(CREATED_KEY, None)
        st.error(f"{md(error)}. Nothing was stored.", icon=":material/error:")
        return
    st.session_state[CREATED_KEY] = (upload, dataset_id)
    st.session_state[REPORT_KEY] = {"name": name, **asdict(report)}
    select(dataset_id)
    st.rerun()


def show_report(report: dict) -> None:
    """What the last upload produced: counts of documents, empty and duplicate texts, renamed ids, warnings."""
    st.success(
        f"Created “{md(report['name'])}”: {report['n_documents']:,} documents from {len(report['files'])} file(s).",
        icon=":material/check_circle:",
    )
    counts = st.columns(3)
    counts[0].metric("Empty documents left out", len(report["empty_ids"]))
    counts[1].metric("Duplicate texts (kept)", len(report["duplicate_text_ids"]))
    counts[2].metric("Repeated ids renamed", len(report["renamed_ids"]))
    for label, ids in (("Empty (ids)", report["empty_ids"]), ("Duplicate texts (ids)", report["duplicate_text_ids"])):
        if ids:
            st.caption(f"{label}: " + md(", ".join(map(str, ids[:20]))) + (" …" if len(ids) > 20 else ""))
    for warning in report["warnings"]:
        st.warning(md(warning))
    st.page_link(PAGES["embeddings"], label="Next: embed the documents", icon=":material/arrow_forward:")


def datasets_table() -> None:
    datasets = workspace().datasets()
    if not datasets:
        st.caption("No datasets yet.")
        return
    rows = [
        {
            "name": d.name,
            "documents": d.n_documents,
            "empty left out": len(d.report.get("empty_ids", [])),
            "duplicate texts": len(d.report.get("duplicate_text_ids", [])),
            "files": ", ".join(d.sources),
            "metadata columns": ", ".join(d.metadata_columns),
            "created": d.created_at[:16].replace("T", " "),
            "id": d.dataset_id,
        }
        for d in reversed(datasets)
    ]
    st.dataframe(pd.DataFrame(rows), hide_index=True, key="datasets_table")


def manage_section() -> None:
    dataset = current_dataset()
    if dataset is None:
        return
    st.markdown(f"**Selected dataset:** {md(dataset.name)} (choose another in the sidebar)")
    rename, delete = st.columns(2)
    with rename.form("rename_form", border=True):
        new_name = st.text_input("New name", value=dataset.name, key=f"rename_{dataset.dataset_id}")
        if st.form_submit_button("Rename"):
            try:
                workspace().rename_dataset(dataset.dataset_id, new_name)
            except PrismaError as error:  # a name that shows nothing, or too long
                st.error(md(error), icon=":material/error:")
            else:
                st.rerun()
    with delete.container(border=True):
        st.markdown("Deleting removes the documents, embeddings and every SAE run of this dataset.")
        confirmed = st.checkbox(f"Yes, delete “{md(dataset.name)}”", key=f"confirm_delete_{dataset.dataset_id}")
        if st.button("Delete dataset", disabled=not confirmed, key="delete_dataset"):
            workspace().delete_dataset(dataset.dataset_id)
            st.session_state.pop(REPORT_KEY, None)
            st.rerun()


st.subheader("Add a dataset")
upload_section()
if REPORT_KEY in st.session_state:
    show_report(st.session_state[REPORT_KEY])
st.subheader("Datasets in this workspace")
datasets_table()
manage_section()
if (selected := current_dataset()) is not None:
    st.subheader("Add documents to the selected dataset")
    add_documents_section(selected)
