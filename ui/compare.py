"""Compare groups (Explore): how common each concept is in each group, which differences hold once chance is
accounted for (in plain words), how common the shown concepts are in every group, and the concepts that best
predict the groups on documents a model never saw."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from prisma_core.pipeline import LoadedRun
from prisma_core.pipeline.comparison import (
    LEFTOVER_GROUPS,
    MAX_Q,
    Predictors,
    feature_order,
    q_text,
    range_text,
    ranked,
    summarise,
    verdicts,
)
from prisma_core.pipeline.read_model import COMPARISON_WORDS, LEVEL_PLURALS, spreadsheet_csv
from ui import charts, levels
from ui.loaders import comparison, predictors
from ui.state import revision, workspace
from ui.text import md

MAX_Q_CHOICES = (0.001, 0.01, 0.05, 0.1, 0.2)
PER_GROUP = 5
PREDICTION_HELP = (
    "A model learns each document's group from the concepts it holds, on part of the documents, and is tested on "
    "the others, in turn, so every document is predicted by a model that never saw it. A concept's score is how "
    "much the model's confidence in the right group drops, on those unseen documents, without it. Concepts that "
    "only fit a few documents by heart score nothing."
)
STATISTICS_CAPTION = (
    "Ranges: the share would likely fall in this range with other documents like these (95% range). q: how "
    "likely the difference is to be chance, counting every comparison made here; differences with q below the "
    "threshold hold, the others could be chance. " + COMPARISON_WORDS["small"]
)


def compare_groups(run: LoadedRun, column: str, groups: pd.Series, level: str, group_order: list[str]) -> None:
    """The statistics of every difference at `level`, the heatmap of the concepts shown, the download of every
    comparison, then the concepts that predict the groups."""
    if levels.available_units(run, level) is None:
        return
    run_id = run.record.run_id
    result = comparison(workspace().uri, run_id, revision(run_id), level, groups)
    max_q = q_threshold("How sure must a difference be to hold?", "max_q", COMPARISON_WORDS["q"])
    order = ranked(result, max_q)
    st.markdown(md(summarise(result, max_q).sentence(level)))
    top = order.groupby("group", sort=False).head(PER_GROUP)
    st.markdown(
        f"**What sets each group apart**: per group, up to {PER_GROUP} {LEVEL_PLURALS[level]}, the differences "
        "that hold first"
    )
    st.dataframe(statistics_table(top), hide_index=True, key="distinctive_table", column_config=_columns(level))
    st.caption(STATISTICS_CAPTION)
    shown = result[result["concept"].isin(top["concept"])]
    concepts = feature_order(shown["unit"], shown["concept"]) if level == "feature" else list(top["concept"])
    st.markdown(f"**How common each of these {LEVEL_PLURALS[level]} is in every group**")
    st.altair_chart(charts.group_prevalence(shown, list(dict.fromkeys(concepts)), group_order), width="stretch")
    st.download_button(
        f"Every comparison with its statistics (CSV, {len(result):,} rows)",
        lambda: spreadsheet_csv(statistics_download(order, column)),
        file_name=f"group_comparison_{level}.csv",
        mime="text/csv",
        key="download_comparison",
        on_click="ignore",
    )
    predicting(run, groups, level)


def q_threshold(question: str, key: str, help_text: str) -> float:
    """The q below which a finding holds, as the analyst sets it (MAX_Q by default)."""
    return st.select_slider(
        question, MAX_Q_CHOICES, value=MAX_Q, format_func=lambda q: f"q below {q:g}", key=key, help=help_text
    )


def statistics_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The shown rows of a ranked comparison, with the ranges and the verdict in words."""
    return pd.DataFrame(
        {
            "group": frame["group"],
            "concept": frame["concept"],
            "n_documents": frame["n_documents"],
            "prevalence": frame["prevalence"],
            "prevalence_range": range_text(frame["prevalence_low"], frame["prevalence_high"]),
            "prevalence_rest": frame["prevalence_rest"],
            "rest_range": range_text(frame["rest_low"], frame["rest_high"]),
            "difference": frame["difference"],
            "lift": frame["lift"],
            "q": [q_text(q) for q in frame["q_value"]],
            "verdict": verdicts(frame),
        }
    )


def statistics_download(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """Every comparison for the CSV: the column compared, then every statistic, in reading order."""
    shown = frame.drop(columns=["feature_id", "unit"]).rename(columns={"holds": "holds (q below the threshold)"})
    shown.insert(0, "column", column)
    return shown


def _columns(noun: str) -> dict[str, st.column_config.Column | str]:
    number, text = st.column_config.NumberColumn, st.column_config.TextColumn
    return {
        "group": "Group",
        "concept": text(noun.capitalize(), width="large"),
        "n_documents": number("Documents in group with it"),
        "prevalence": number("In group", format="percent", help=f"Share of the group's documents with the {noun}."),
        "prevalence_range": text("In group: range", help=COMPARISON_WORDS["range"]),
        "prevalence_rest": number("Elsewhere", format="percent", help="Share of all other documents with it."),
        "rest_range": text("Elsewhere: range", help=COMPARISON_WORDS["range"]),
        "difference": number("Difference", format="percent", help="In group minus elsewhere, in percentage points."),
        "lift": number("Times more common", format="%.1f", help=COMPARISON_WORDS["lift"]),
        "q": text("q", help=COMPARISON_WORDS["q"]),
        "verdict": text("Verdict", help=COMPARISON_WORDS["q"]),
    }


def predicting(run: LoadedRun, groups: pd.Series, level: str) -> None:
    """What sets each group apart on unseen documents (computed when asked: it trains a model five times)."""
    st.markdown(f"**Which {LEVEL_PLURALS[level]} predict the group of a document?**")
    st.caption(PREDICTION_HELP)
    if not st.toggle("Find them (a few seconds)", key="predict_groups"):
        return
    run_id = run.record.run_id
    found = predictors(workspace().uri, run_id, revision(run_id), level, groups)
    if found is None:
        st.info("Too few documents per group to learn from: at least two groups need 5 documents or more.")
        return
    st.markdown(md(found.sentence()))
    st.dataframe(predictors_table(found), hide_index=True, key="predictors_table", column_config=_gain_columns(level))


GAIN_HELP = (
    "How much lower, on average over the group's unseen documents, the model's confidence in the right group is "
    "without this concept."
)


def _gain_columns(level: str) -> dict[str, st.column_config.Column | str]:
    number = st.column_config.NumberColumn
    return {
        "group": "Group",
        "concept": st.column_config.TextColumn(level.capitalize(), width="large"),
        "gain": number("Confidence it adds", format="percent", help=GAIN_HELP),
        "share": number("Group's documents with it", format="percent"),
    }


def predictors_table(found: Predictors) -> pd.DataFrame:
    frame = found.frame.assign(pooled=found.frame["group"].isin(LEFTOVER_GROUPS))
    frame = frame.sort_values("pooled", kind="stable").groupby("group", sort=False).head(PER_GROUP)
    return frame[["group", "concept", "gain", "share"]]
