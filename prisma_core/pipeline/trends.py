"""Concepts over time for a run (the app's Over time view, the command line's `trends`, the export and the report):
a date column's periods, each level's concepts followed over them with the analyst's edits applied (the read model's
units, `explore.level_units`), named as everywhere else, and the table of every concept and period.

The door to the trends for the app and the command line: what they use of `prisma_core.trends` is imported
here (`name as name` marks a re-export)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from prisma_core.compare import MAX_Q
from prisma_core.errors import NotFoundError
from prisma_core.names import unit_names
from prisma_core.pipeline.files import file_target, write_whole
from prisma_core.reading.explore import LEVELS, level_units, spreadsheet_csv
from prisma_core.reading.runs import LoadedRun
from prisma_core.store import Workspace
from prisma_core.trends import PERIODS as PERIODS
from prisma_core.trends.config import TrendConfig
from prisma_core.trends.over_time import Trends, judged, over_time
from prisma_core.trends.over_time import default_compared as default_compared
from prisma_core.trends.over_time import ranked as ranked
from prisma_core.trends.over_time import summarise as summarise
from prisma_core.trends.periods import Timeline, dated_column, suggested_period, timeline
from prisma_core.trends.periods import date_columns as date_columns


@dataclass(frozen=True)
class LevelTrends:
    level: str
    trends: Trends
    names: dict[int, str]  # column of the level's matrix -> the concept's name
    ids: list[int]  # column of the level's matrix -> the concept's id (theme, sub-theme, family or feature id)


@dataclass(frozen=True)
class ConceptTrends:
    column: str
    timeline: Timeline
    levels: list[LevelTrends]


def column_timeline(metadata: pd.DataFrame, column: str | None, period: str = "auto") -> Timeline:
    """The periods of a date column (the first one when None; `period` "auto": the one its span suggests)."""
    chosen = dated_column(metadata, column)
    if chosen is None:
        raise NotFoundError(
            "This dataset has no column of dates to follow concepts over time (dates are recognised when a dataset "
            "is created, from a column of dates such as 2007-04-12, 12/04/2007 or Excel dates)."
        )
    dates = metadata[chosen]
    return timeline(dates, suggested_period(dates) if period == "auto" else period)


def level_trends(run: LoadedRun, line: Timeline, level: str, compared: tuple[int, int] | None = None) -> LevelTrends:
    """One level's concepts (as the analyst edited them) over the periods."""
    units, frame = level_units(run, level)
    return LevelTrends(
        level, over_time(units, line, compared), unit_names(level, frame), frame["unit"].astype(int).tolist()
    )


def compared_periods(line: Timeline, config: TrendConfig) -> tuple[int, int] | None:
    """The periods the config names for the change test (either given alone: the default for the other), else
    None (the default pair)."""
    if config.compare_from is None and config.compare_to is None:
        return None
    first = 0 if config.compare_from is None else line.position(config.compare_from)
    last = len(line.periods) - 1 if config.compare_to is None else line.position(config.compare_to)
    return first, last


def concept_trends(workspace: Workspace, run: LoadedRun, config: TrendConfig = TrendConfig()) -> ConceptTrends:
    """Every level the config asks for (every level a run has, for "every"), over the periods of its date column."""
    return trends_of(run, workspace.metadata(run.record.dataset_id), config)


def trends_of(run: LoadedRun, metadata: pd.DataFrame, config: TrendConfig = TrendConfig()) -> ConceptTrends:
    """`concept_trends` with the dataset's metadata already read."""
    line = column_timeline(metadata, config.column, config.period)
    compared = compared_periods(line, config)
    levels = LEVELS if config.level == "every" else (config.level,)
    found = []
    for level in levels:
        try:
            found.append(level_trends(run, line, level, compared))
        except NotFoundError:
            if config.level != "every":
                raise  # a level asked for by name that this run lacks (made before themes existed)
    return ConceptTrends(str(dated_column(metadata, config.column)), line, found)


TABLE_COLUMNS = (
    "level",
    "concept_id",
    "concept",
    "period",
    "period_start",
    "documents_in_period",
    "documents_with_concept",
    "share",
    "share_low",
    "share_high",
    "too_few_documents",
    "verdict",
    "trend_change",
    "trend_q",
    "compared",
    "change",
    "change_verdict",
    "change_q",
)


def trends_table(found: ConceptTrends, max_q: float = MAX_Q) -> pd.DataFrame:
    """One row per concept and period (TABLE_COLUMNS): its share with the 95% range, whether the period has too few
    documents, and the concept's verdicts (trend over the span, change between the compared periods) with their q."""
    return pd.concat([_level_table(level, found.timeline, max_q) for level in found.levels], ignore_index=True)


def _level_table(level: LevelTrends, line: Timeline, max_q: float) -> pd.DataFrame:
    shares, trends = level.trends.shares, level.trends
    tests = judged(trends.tests, max_q).set_index("feature_id").loc[shares["feature_id"]].reset_index()
    names, starts = line.names, line.periods.start_time
    compared = "" if trends.compared is None else " to ".join(names[p] for p in trends.compared)
    return pd.DataFrame(
        {
            "level": level.level,
            "concept_id": [level.ids[c] for c in shares["feature_id"]],
            "concept": shares["feature_id"].map(level.names).to_numpy(),
            "period": [names[p] for p in shares["period"]],
            "period_start": starts[shares["period"]].date,
            "documents_in_period": shares["n_period"].to_numpy(),
            "documents_with_concept": shares["n_documents"].to_numpy(),
            "share": shares["share"].to_numpy(),
            "share_low": shares["share_low"].to_numpy(),
            "share_high": shares["share_high"].to_numpy(),
            "too_few_documents": shares["too_few"].to_numpy(),
            "verdict": tests["verdict"].to_numpy(),
            "trend_change": tests["trend_change"].to_numpy(),
            "trend_q": tests["trend_q"].to_numpy(),
            "compared": compared,
            "change": tests["change"].to_numpy(),
            "change_verdict": tests["change_verdict"].to_numpy(),
            "change_q": tests["change_q"].to_numpy(),
        },
        columns=list(TABLE_COLUMNS),
    )


def write_trends(
    workspace: Workspace, run: LoadedRun, out: str | Path, config: TrendConfig = TrendConfig()
) -> tuple[Path, ConceptTrends]:
    """Writes `trends_table` as CSV to `out` (whole or not at all; text cells that a spreadsheet would run as a
    formula made inert) and returns its resolved path and what it holds."""
    target = file_target(workspace, Path(out), "table", "trends.csv")
    found = concept_trends(workspace, run, config)
    return write_whole(target, spreadsheet_csv(trends_table(found, config.max_q)), "the table over time"), found
