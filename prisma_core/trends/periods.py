"""Dates into periods: which metadata columns hold dates, the period a date column's span suggests (day, week, month,
quarter or year), every period from the first date to the last (empty ones too: a gap is part of the story), and each
period's name."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from prisma_core.errors import NotFoundError, SettingsError
from prisma_core.trends import MIN_PERIOD_DOCUMENTS, PERIODS

PERIOD_CODES = {"day": "D", "week": "W-SUN", "month": "M", "quarter": "Q", "year": "Y"}
"""Each period as a pandas period code (weeks run Monday to Sunday)."""
MAX_PERIODS = 36
"""The suggested period is the finest one that splits the span into at most this many periods (three years of
months, nine of quarters) with MIN_PERIOD_DOCUMENTS documents or more per period on average."""


def date_columns(metadata: pd.DataFrame) -> list[str]:
    """The metadata columns that hold dates (stored as dates at ingest), at least one."""
    return [
        str(c)
        for c in metadata.columns
        if pd.api.types.is_datetime64_any_dtype(metadata[c]) and metadata[c].notna().any()
    ]


def dated_column(metadata: pd.DataFrame, chosen: str | None) -> str | None:
    """The date column chosen, else the first one (None when the dataset has none)."""
    found = date_columns(metadata)
    if chosen is None:
        return found[0] if found else None
    if chosen not in found:
        offered = ", ".join(found) or "none: dates are recognised when a dataset is created"
        raise NotFoundError(f"The dataset has no column of dates named “{chosen}” (its date columns: {offered}).")
    return chosen


def plain_dates(dates: pd.Series) -> pd.Series:
    """Dates without a time zone: each kept at its own clock time (a column holds one time zone)."""
    return dates.dt.tz_localize(None) if getattr(dates.dt, "tz", None) is not None else dates


def suggested_period(dates: pd.Series) -> str:
    """The finest period with at most MAX_PERIODS periods over the dates' span and MIN_PERIOD_DOCUMENTS documents a
    period on average; "year" when none is that coarse."""
    present = plain_dates(dates).dropna()
    if present.empty:
        return "year"
    for period in PERIODS:
        span = present.min().to_period(PERIOD_CODES[period]), present.max().to_period(PERIOD_CODES[period])
        n_periods = (span[1] - span[0]).n + 1
        if n_periods == 1 or (n_periods <= MAX_PERIODS and len(present) / n_periods >= MIN_PERIOD_DOCUMENTS):
            return period
    return "year"


@dataclass(frozen=True)
class Timeline:
    """The periods of a date column: every period from the first date's to the last's, and each document's."""

    period: str  # day, week, month, quarter or year
    periods: pd.PeriodIndex  # in order, empty periods included
    index: np.ndarray  # [n_documents] the position of each document's period in `periods`; -1 without a date

    @property
    def sizes(self) -> np.ndarray:
        """Documents per period."""
        return np.bincount(self.index[self.index >= 0], minlength=len(self.periods)).astype(np.int64)

    @property
    def names(self) -> list[str]:
        return [period_name(p, self.period) for p in self.periods]

    @property
    def n_undated(self) -> int:
        return int((self.index < 0).sum())

    def position(self, text: str) -> int:
        """The position of the period holding the date `text` ("2007-04", "2007Q2", "2007-04-12", a period's name)."""
        try:
            wanted = pd.Period(text.removeprefix("week of "), freq=PERIOD_CODES[self.period])
        except (ValueError, TypeError):
            raise SettingsError(f"“{text}” is not a date or a period (e.g. 2007-04, 2007Q2 or 2007-04-12).") from None
        if wanted not in self.periods:
            raise SettingsError(
                f"{period_name(wanted, self.period)} is outside the dates ({self.names[0]} to {self.names[-1]})."
            )
        return int(self.periods.get_loc(wanted))


def timeline(dates: pd.Series, period: str) -> Timeline:
    """`dates` (one per document, NaT where missing) grouped by `period`."""
    if period not in PERIOD_CODES:
        raise SettingsError(f"period must be one of {', '.join(PERIODS)}, got “{period}”.")
    present = plain_dates(dates)
    if present.notna().sum() == 0:
        raise SettingsError("No document has a date in this column.")
    periods = present.dt.to_period(PERIOD_CODES[period])
    every = pd.period_range(periods.min(), periods.max(), freq=PERIOD_CODES[period])
    index = np.full(len(dates), -1, dtype=np.int64)
    dated = periods.notna().to_numpy()
    index[dated] = every.get_indexer(periods[dated])
    return Timeline(period, every, index)


def period_name(period: pd.Period, kind: str) -> str:
    """A period in words: "2007-04-12", "week of 2007-04-09", "2007-04", "2007Q2", "2007"."""
    if kind == "week":
        return f"week of {period.start_time.date().isoformat()}"
    return str(period)
