"""Over time (Explore): how common each concept is in each period of a date column, which rise or fall beyond chance
(in plain words), a chart of the chosen concepts' shares with their ranges, and the download of every concept and
period."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from prisma_core.pipeline import LoadedRun
from prisma_core.pipeline.comparison import q_text
from prisma_core.pipeline.read_model import LEVEL_PLURALS, TREND_WORDS, level_word, spreadsheet_csv
from prisma_core.pipeline.trends import (
    PERIODS,
    ConceptTrends,
    LevelTrends,
    Timeline,
    date_columns,
    default_compared,
    ranked,
    suggested_period,
    summarise,
    timeline,
    trends_table,
)
from ui import charts, levels
from ui.compare import q_threshold
from ui.loaders import trends
from ui.state import revision, workspace
from ui.text import md

SHOWN_CHARTS = 6
NO_DATES = (
    "This dataset has no column of dates to follow its concepts over time. Dates are recognised when a dataset is "
    "created, from a column of dates such as 2007-04-12, 12/04/2007 (the Datasets page asks which order the day "
    "and the month are in when it cannot tell), Excel dates or Unix times."
)


def over_time_view(run: LoadedRun, metadata: pd.DataFrame) -> None:
    """The date column and its periods, the level, the two periods compared and the threshold, then the verdicts,
    the chart and the download."""
    columns = date_columns(metadata)
    if not columns:
        st.info(NO_DATES, icon=":material/event_busy:")
        return
    left, right = st.columns(2)
    column = left.selectbox("Dates in", columns, key="trend_column")
    dates = metadata[column]
    suggested = suggested_period(dates)
    period = right.selectbox(
        "Group the dates by",
        PERIODS,
        index=PERIODS.index(suggested),
        format_func=lambda p: f"{p} (suggested for this span)" if p == suggested else p,
        key=f"trend_period_{column}",
        help="The suggested period splits the dates into at most 36 periods with 10 documents or more each on "
        "average: finer periods hold fewer documents, and their shares are less sure.",
    )
    line = timeline(dates, period)
    level = levels.level_picker("trend_level", default="theme")
    if levels.available_units(run, level) is None:
        return
    compared = compared_periods(line, f"{column}_{period}")
    max_q = q_threshold("How sure must a change be to hold?", "trend_max_q", TREND_WORDS["q"])
    run_id = run.record.run_id
    found = trends(workspace().uri, run_id, revision(run_id), level, dates, period, compared)
    show_findings(found, line, max_q)
    download(ConceptTrends(column, line, [found]), max_q)


def compared_periods(line: Timeline, key: str) -> tuple[int, int] | None:
    """The two periods the change test compares: the first and the last with enough documents unless the analyst
    picks others."""
    default = default_compared(line.sizes)
    if default is None:
        st.caption("Only one period has documents: there is no change to test between periods.")
        return None
    names, occupied = line.names, [int(p) for p in range(len(line.periods)) if line.sizes[p] > 0]
    left, right = st.columns(2)
    first = left.selectbox(
        "Compare the period",
        occupied,
        index=occupied.index(default[0]),
        format_func=lambda p: f"{names[p]} ({line.sizes[p]:,} documents)",
        key=f"trend_from_{key}",
        help=TREND_WORDS["change"],
    )
    later = [p for p in occupied if p > first] or occupied[-1:]
    last = right.selectbox(
        "with the period",
        later,
        index=later.index(default[1]) if default[1] in later else len(later) - 1,
        format_func=lambda p: f"{names[p]} ({line.sizes[p]:,} documents)",
        key=f"trend_to_{key}",
    )
    return first, last


def show_findings(found: LevelTrends, line: Timeline, max_q: float) -> None:
    level, plural = found.level, LEVEL_PLURALS[found.level]
    summary = summarise(found.trends, max_q)
    st.markdown(md(summary.sentence(level_word(level), plural)))
    notes = [summary.too_few_sentence()]
    if line.n_undated:
        notes.append(f"{line.n_undated:,} documents without a date are left out.")
    if any(notes):
        st.caption(" ".join(note for note in notes if note))
    order = ranked(found.trends.tests, max_q)
    table = verdict_table(order, found, line)
    st.markdown(f"**Which {plural} change**: those that rise or fall beyond chance first, largest change first")
    st.dataframe(table, hide_index=True, key="trend_table", column_config=_columns(level, found, line))
    chart_of_chosen(found, order, line)


def verdict_table(order: pd.DataFrame, found: LevelTrends, line: Timeline) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "concept": order["feature_id"].map(found.names),
            "verdict": order["verdict"],
            "trend_change": order["trend_change"] * 100,
            "trend_q": [q_text(q) if q == q else "" for q in order["trend_q"]],
            "from_share": order["from_share"],
            "to_share": order["to_share"],
            "change_verdict": order["change_verdict"],
            "change_q": [q_text(q) if q == q else "" for q in order["change_q"]],
            "n_documents": order["n_documents"],
        }
    )


def _columns(level: str, found: LevelTrends, line: Timeline) -> dict[str, st.column_config.Column | str]:
    number, text = st.column_config.NumberColumn, st.column_config.TextColumn
    compared = found.trends.compared
    first, last = ("first", "last") if compared is None else (line.names[compared[0]], line.names[compared[1]])
    return {
        "concept": text(level_word(level).capitalize(), width="large"),
        "verdict": text("Over the whole span", help=TREND_WORDS["trend"]),
        "trend_change": number(
            "Change over the span (points)",
            format="%+.1f",
            help="The straight line through the shares, from the first period to the last, in percentage points.",
        ),
        "trend_q": text("q (trend)", help=TREND_WORDS["q"]),
        "from_share": number(f"In {first}", format="percent", help="Share of the period's documents with it."),
        "to_share": number(f"In {last}", format="percent", help="Share of the period's documents with it."),
        "change_verdict": text(f"From {first} to {last}", help=TREND_WORDS["change"]),
        "change_q": text("q (change)", help=TREND_WORDS["q"]),
        "n_documents": number("Dated documents with it"),
    }


def chart_of_chosen(found: LevelTrends, order: pd.DataFrame, line: Timeline) -> None:
    """The shares per period of the concepts chosen (those that change, by default), one small chart each."""
    names = found.names
    changing = order.loc[order["changes"], "feature_id"].tolist()
    default = (changing or order["feature_id"].tolist())[:SHOWN_CHARTS]
    chosen = st.multiselect(
        f"Show over time (up to {SHOWN_CHARTS})",
        order["feature_id"].tolist(),
        default=default,
        format_func=names.__getitem__,
        max_selections=SHOWN_CHARTS,
        key=f"trend_chart_{found.level}",
    )
    if not chosen:
        return
    shares = found.trends.shares
    shown = shares[shares["feature_id"].isin(chosen)].merge(order[["feature_id", "verdict"]], on="feature_id")
    shown = shown.assign(
        concept=shown["feature_id"].map(names),
        period_name=[line.names[p] for p in shown["period"]],
        period_start=line.periods.start_time[shown["period"]],
    )
    st.altair_chart(charts.shares_over_time(shown, [names[c] for c in chosen], line.period), width="stretch")
    st.caption(
        "Line: the share of each period's documents with the concept; band: its 95% range; hollow points: periods "
        "with too few documents. Green: rising, orange: falling, grey: no change that holds."
    )


def download(found: ConceptTrends, max_q: float) -> None:
    level = found.levels[0].level
    st.download_button(
        f"Every {level_word(level)} and period with its statistics (CSV)",
        lambda: spreadsheet_csv(trends_table(found, max_q)),
        file_name=f"over_time_{level}.csv",
        mime="text/csv",
        key="download_trends",
        on_click="ignore",
    )
