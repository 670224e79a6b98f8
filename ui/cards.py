"""The feature card (Features page, and Families when a node is clicked) and its label editor."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from prisma_core.pipeline import LoadedRun, PrismaError, edits, family_membership, feature_quotes
from prisma_core.pipeline.edits import MAX_LABEL_CHARS, MAX_MANUAL_DESCRIPTION_CHARS
from prisma_core.pipeline.read_model import (
    ScoreSupport,
    feature_column,
    nearest_active,
    one_feature_support,
    ranked_features,
    reliability,
    score_words,
    search_features,
    support_words,
    top_documents,
    trainings_compared,
    zero_documents,
)
from ui import charts
from ui.glossary import TERMS
from ui.state import bump_revision, dataset_documents, workspace
from ui.text import feature_name, md, snippet

TOP_DOCUMENTS = 10
CONTRAST_DOCUMENTS = 5
FULL_TEXTS = 3


FEATURE_COLUMNS = {
    "feature_id": st.column_config.NumberColumn("Feature", format="%d"),
    "label": st.column_config.TextColumn("Label", width="large"),
    "comes_back": st.column_config.TextColumn("Comes back", help=TERMS["trainings compared"]),
    "density": st.column_config.NumberColumn("Documents", help="How many documents the feature is active on."),
    "density_fraction": st.column_config.NumberColumn(
        "Share", format="percent", help="The share of all documents the feature is active on."
    ),
    "mean_activation": st.column_config.NumberColumn(
        "Typical strength", format="%.3f", help="Average activation over the documents where the feature is active."
    ),
    "max_activation": st.column_config.NumberColumn(
        "Strongest", format="%.3f", help="The highest activation of the feature in any document."
    ),
    "score_embedding": st.column_config.NumberColumn(
        "Label score",
        format="%.2f",
        help="How well the label tells the feature's documents from the others: 1.0 perfectly, 0.5 no better than "
        "chance. Empty when there are too few documents to judge.",
    ),
    "label_source": st.column_config.TextColumn("Label from", help="keywords, a language model, or manual (you)."),
    "family_id": st.column_config.NumberColumn("Family", format="%d"),
}
"""Column names and help texts of a features table, for an analyst."""


def features_table(run: LoadedRun, query: str = "") -> pd.DataFrame:
    """The features matching `query` (all when empty), those found in the most trainings first (see
    `search_features`), with how reliably each comes back and its family, in FEATURE_COLUMNS order."""
    matches = search_features(run, query).merge(family_membership(run.families), on="feature_id", how="left")
    matches["comes_back"] = comes_back_words(run, matches["found_in"])
    return matches[list(FEATURE_COLUMNS)].reset_index(drop=True)


def reliable_summary(run: LoadedRun) -> str:
    """E.g. "52 found in all 3 trainings, listed first · 2 background"."""
    compared = trainings_compared(run.settings)
    background = int(run.features["background"].sum())
    parts = [] if background == 0 else [f"{background:,} background (active on most documents), listed last"]
    if compared < 2:
        return " · ".join(["trained once: how reliably features come back was not checked", *parts])
    everywhere = int((run.features["found_in"] == compared).sum())
    return " · ".join([f"{everywhere:,} found in all {compared} trainings, listed first", *parts])


def comes_back_words(run: LoadedRun, found_in: pd.Series) -> list[str]:
    """ "found in 3 of 3 trainings" (or "not checked") for each feature's found_in."""
    compared = trainings_compared(run.settings)
    return [reliability(found, compared) for found in found_in]


def feature_row(run: LoadedRun, feature_id: int) -> pd.Series:
    return run.features.set_index("feature_id").loc[int(feature_id)]


def feature_card(run: LoadedRun, feature_id: int, key: str) -> None:
    """Everything about one feature. `key` keeps widget keys apart when two pages show a card."""
    row = feature_row(run, feature_id)
    docs = dataset_documents(run.record.dataset_id)
    st.subheader(f"Feature #{feature_id}: {md(row['label'])}")
    if isinstance(row["description"], str) and row["description"]:
        st.caption(md(row["description"]))
    if isinstance(row["label_note"], str) and row["label_note"]:
        st.info(md(row["label_note"]), icon=":material/balance:")
    n_docs = run.codes.shape[0]
    columns = st.columns(4)
    columns[0].metric(
        "Active on", f"{int(row['density']):,} docs", help=f"{row['density_fraction']:.1%} of the {n_docs:,} documents"
    )
    columns[1].metric(
        "Typical strength", f"{row['mean_activation']:.3f}", help="Average activation where the feature is active."
    )
    columns[2].metric("Strongest", f"{row['max_activation']:.3f}", help="Its highest activation in any document.")
    columns[3].metric("Label from", str(row["label_source"]))
    if int(row["density"]) == 0:
        st.info("This feature never fires on these documents: it has no documents to show.")
        return
    reliability_note(run, row)

    left, right = st.columns([3, 2])
    with left:
        st.markdown("**How strongly it fires** (documents per activation, where active)")
        st.altair_chart(charts.activation_histogram(feature_column(run.codes, feature_id)[1]), width="stretch")
    with right:
        st.markdown("**Similar features** (closest in what they stand for)")
        nearest = nearest_active(run, feature_id)
        if nearest.empty:
            st.caption("No other feature stands for anything close to this one.")
        else:
            st.dataframe(nearest, hide_index=True, key=f"{key}_nearest", column_config=_number_columns())

    where_it_appears(run, feature_id)

    st.markdown("**Documents where it is strongest**")
    top = top_documents(run.codes, feature_id, TOP_DOCUMENTS)
    top_docs = docs.beside(top)
    st.dataframe(
        _document_table(top_docs, with_value=True), hide_index=True, key=f"{key}_top", column_config=DOCUMENT_COLUMNS
    )
    for doc in top_docs.head(FULL_TEXTS).itertuples():
        with st.expander(f"Full text: {md(doc.doc_id)} (strength {doc.value:.3f})"):
            st.text(doc.text)

    st.markdown("**For contrast: documents where it is absent**")
    zero = docs.at(zero_documents(run.codes, feature_id, CONTRAST_DOCUMENTS))
    st.dataframe(
        _document_table(zero, with_value=False),
        hide_index=True,
        key=f"{key}_zero",
        column_config=DOCUMENT_COLUMNS,
    )

    label_editor(run, feature_id, key)


def where_it_appears(run: LoadedRun, feature_id: int) -> None:
    """The passages where the feature fires most, each from another document, quoted with the document's title."""
    st.markdown(
        "**Where it appears**: the passages where this concept is strongest, each from a different document",
        help="Documents are read a few sentences at a time; these are the sentences that carry the concept most.",
    )
    try:
        with st.spinner("Finding the passages where each concept appears (once for this run)…"):
            quotes = feature_quotes(workspace(), run, [feature_id])
    except PrismaError as error:
        st.error(md(error))
        return
    if quotes.empty:
        st.caption("No passage of the documents carries it on its own.")
        return
    for quote in quotes.itertuples():
        with st.container(border=True):
            st.markdown(f"“{md(quote.quote)}”")
            st.caption(f"{md(quote.title or quote.doc_id)} · document {md(quote.doc_id)} · strength {quote.value:.3f}")


def reliability_note(run: LoadedRun, row: pd.Series) -> None:
    """How reliably the feature comes back, in words, and what that means when it is not found every time or when it
    is background."""
    compared = trainings_compared(run.settings)
    words = reliability(row["found_in"], compared)
    if row["background"]:
        st.info(
            f"Background, {words}: this feature is active on {row['density_fraction']:.0%} of the documents, so it "
            "stands for something nearly all of them have (a template, a house style), not a topic that sets some "
            "apart.",
            icon=":material/layers:",
        )
    elif compared > 1 and not pd.isna(row["found_in"]) and int(row["found_in"]) < compared:
        st.warning(
            f"Less reliable: {words}. Trained again, this feature may split in two or merge with a neighbour; check "
            "its documents below before relying on it.",
            icon=":material/help:",
        )
    else:
        st.caption(f"Comes back: {words}.")


def _document_table(frame: pd.DataFrame, with_value: bool) -> pd.DataFrame:
    table = pd.DataFrame({"doc_id": frame["doc_id"], "title": frame["title"], "text": frame["text"].map(snippet)})
    if with_value:
        table.insert(0, "activation", frame["value"].round(4))
    return table


def _number_columns() -> dict[str, st.column_config.Column]:
    return {
        "feature_id": st.column_config.NumberColumn("Feature", format="%d"),
        "cosine": st.column_config.NumberColumn(
            "Closeness", format="%.3f", help="1 = the same concept; near 0 = unrelated (cosine of the directions)."
        ),
        "label": st.column_config.TextColumn("Label", width="large"),
        "comes_back": st.column_config.TextColumn("Comes back", help=TERMS["trainings compared"]),
        "density": st.column_config.NumberColumn("Documents"),
    }


DOCUMENT_COLUMNS = {
    "activation": st.column_config.NumberColumn("Strength", format="%.4f"),
    "doc_id": st.column_config.TextColumn("Document"),
    "title": st.column_config.TextColumn("Title"),
    "text": st.column_config.TextColumn("Text (start)", width="large"),
}
"""Display names of the document tables (the data keeps its column names)."""
SAVED_KEY = "label_saved"


def label_editor(run: LoadedRun, feature_id: int, key: str) -> None:
    """All interpretations of the feature with their source; pick the preferred one or write your own.

    LLM labels (made on the Labels page) land in the same interpretations table. Each score is shown with its
    uncertainty band and against chance (0.5), or as "not enough evidence" for a feature that fires too rarely.
    """
    run_id = run.record.run_id
    interpretations = workspace().labels.of(run_id)
    mine = interpretations[interpretations["feature_id"] == feature_id].sort_values("created_at")
    st.markdown("**Label**")
    saved = st.session_state.pop(SAVED_KEY, None)
    if saved and saved[:2] == (run_id, feature_id):
        st.success(f"Saved: feature #{feature_id} is now labelled “{md(saved[2])}”.", icon=":material/check_circle:")
    choose, write = st.tabs(["All labels", "Write your own"])
    with choose:
        support = feature_score_support(run, feature_id)
        table = mine[["label", "description", "source", "created_at", "preferred"]].assign(
            score=[score_words(s, support, detection=False) for s in mine["score_embedding"]],
            llm_check=[score_words(s, support, detection=True) for s in mine["score_detection"]],
        )
        table["created_at"] = table["created_at"].astype("string").str[:16].str.replace("T", " ")
        st.dataframe(
            table,
            hide_index=True,
            key=f"{key}_interpretations",
            column_config={
                "label": "Label",
                "description": "Description",
                "source": "From",
                "created_at": "Added",
                "preferred": st.column_config.CheckboxColumn("Shown"),
                "score": st.column_config.TextColumn("Label score", help=SCORE_HELP, width="medium"),
                "llm_check": st.column_config.TextColumn("LLM check", help=DETECTION_HELP),
            },
        )
        st.caption(support_words(support))
        if len(mine) > 1:
            options = mine["interpretation_id"].tolist()
            by_id = mine.set_index("interpretation_id")
            chosen = st.radio(
                "Show this label",
                options,
                format_func=lambda i: md(f"{by_id.at[i, 'label']} ({by_id.at[i, 'source']})"),
                key=f"{key}_prefer_{feature_id}",
            )
            if st.button("Use this label", key=f"{key}_prefer_button"):
                _prefer(run_id, feature_id, chosen)
    with write, st.form(f"{key}_manual_{feature_id}", clear_on_submit=True):
        label = st.text_input("Label", max_chars=MAX_LABEL_CHARS, key=f"{key}_manual_label")
        description = st.text_area(
            "Description (optional)",
            max_chars=MAX_MANUAL_DESCRIPTION_CHARS,
            key=f"{key}_manual_description",
        )
        if st.form_submit_button("Save label"):
            if not label.strip():
                st.warning("Write a label first.")
            else:
                rename_feature(run, feature_id, label, description)


SCORE_HELP = (
    "How well the label's embedding tells the feature's documents from the others (ROC-AUC): 0.5 is chance, "
    "1.0 perfect. In brackets: the range it would likely take on another sample of as many documents (95%)."
)
DETECTION_HELP = (
    "Given only the label, how well the model picked 5 of the feature's documents out of a mix with 5 others "
    "(balanced accuracy): 0.5 is chance. Ten documents make a wide range."
)


def feature_score_support(run: LoadedRun, feature_id: int) -> ScoreSupport:
    n_strong = int(run.features.set_index("feature_id").at[int(feature_id), "n_strong"])
    return one_feature_support(n_strong, run.codes.shape[0], run.settings.keywords.n_top_documents)


def rename_feature(run: LoadedRun, feature_id: int, label: str, description: str = "") -> None:
    """Stores the analyst's label as an edit (who, when; undone on the Features page's *Your edits*) and as the
    feature's label shown, then shows the card again saying so."""
    run_id = run.record.run_id
    try:
        edits.rename(workspace(), run, "feature", feature_id, label, description)
    except PrismaError as error:
        st.error(md(error))
        return
    bump_revision(run_id)
    st.session_state[SAVED_KEY] = (run_id, feature_id, label.strip())
    st.rerun()


def _prefer(run_id: str, feature_id: int, interpretation_id: str) -> None:
    try:
        workspace().labels.prefer(run_id, feature_id, interpretation_id)
    except PrismaError as error:
        st.error(md(error))
        return
    bump_revision(run_id)
    st.rerun()


def feature_options(run: LoadedRun) -> dict[int, str]:
    """feature id -> display name of the features not hidden, in `ranked_features` order."""
    ranked = ranked_features(run)
    return {int(f): feature_name(f, label) for f, label in zip(ranked["feature_id"], ranked["label"], strict=True)}
