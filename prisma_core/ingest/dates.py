"""Which metadata columns hold dates, and how they are written, so they are stored as dates.

A column is read as dates when every value of it, over every batch of its table, is written one way:
- ISO 8601 text ("2007-04-12", "2007-04-12T09:30:00+02:00"; one time zone for the whole column);
- day, month and year as numbers ("12/04/2007", "12.04.07", "12-04-2007 09:30"): day first or month first, as the
  values show (a first number above 12 is a day); where every value fits both orders the analyst says which one
  (`IngestConfig.date_order`), else the column is kept as text and a warning says how to choose;
- year first with slashes or dots ("2007/04/12");
- numbers, in a column named like a date ("date", "created", "timestamp"...): Excel's day numbers (39184 is
  12 April 2007) or Unix times in seconds or milliseconds, within the years 1925 to 2099 (Excel) or 1973 to 2099
  (Unix), so that counts, prices and years are never taken for dates.
Dates an Excel file stores as dates arrive as dates already and are kept as they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

import pandas as pd

DateOrder = Literal["auto", "day_first", "month_first"]
Reading = Literal["iso", "day_first", "month_first", "year_first", "excel", "unix_seconds", "unix_milliseconds"]

ISO_DATE = r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
_TIME = r"(?:[ T](?P<hour>\d{1,2}):(?P<minute>\d{2})(?::(?P<second>\d{2}))?)?"
_DAY_MONTH = re.compile(
    rf"\s*(?P<a>\d{{1,2}})(?P<sep>[/.\-])(?P<b>\d{{1,2}})(?P=sep)(?P<year>\d{{4}}|\d{{2}}){_TIME}\s*"
)
"""Two numbers of one or two digits then the year: day/month/year or month/day/year."""
_YEAR_FIRST = re.compile(rf"\s*(?P<year>\d{{4}})(?P<sep>[/.])(?P<a>\d{{1,2}})(?P=sep)(?P<b>\d{{1,2}}){_TIME}\s*")
"""Year/month/day with slashes or dots (with dashes it is ISO)."""
DATE_WORDS = ("date", "time", "day", "created", "published", "posted", "updated", "modified", "when")
"""A numeric column is looked at as dates only when its name holds one of these."""
EXCEL_DAYS = (9_133.0, 73_050.0)
"""Excel day numbers of 1925-01-01 and 2099-12-31 (day 0 is 1899-12-30)."""
EXCEL_EPOCH = pd.Timestamp("1899-12-30")
UNIX_SECONDS = (1e8, 4.1e9)
"""1973 to 2099 in seconds since 1970."""
UNIX_MILLISECONDS = (1e11, 4.1e12)
CHECKED_FIRST = 100
"""Values looked at before the whole column, so a column of other text is passed over quickly."""

READING_WORDS: dict[str, str] = {
    "iso": "ISO dates",
    "day_first": "dates written day first (12/04/2007 is 12 April 2007)",
    "month_first": "dates written month first (04/12/2007 is 12 April 2007)",
    "year_first": "dates written year first (2007/04/12)",
    "excel": "Excel day numbers (39184 is 12 April 2007)",
    "unix_seconds": "Unix times in seconds",
    "unix_milliseconds": "Unix times in milliseconds",
}


@dataclass
class DateEvidence:
    """What the batches of one column say about it holding dates: the readings every value so far fits."""

    name: str
    readings: set[str] | None = None  # None: no value seen yet
    zones: set[str] = field(default_factory=set)  # the time zones of the ISO dates seen
    orders_differ: bool = False  # a value fitting both orders reads as different dates in each (04/12, not 04/04)

    def add(self, values: pd.Series) -> None:
        present = values.dropna()
        if present.empty or self.readings == set():
            return
        fits = self._fits(present)
        self.readings = fits if self.readings is None else self.readings & fits

    def _fits(self, values: pd.Series) -> set[str]:
        if values.dtype.kind in "iuf":
            return _number_readings(self.name, values)
        if values.dtype.kind != "O" and not isinstance(values.dtype, pd.StringDtype):
            return set()
        if not values.map(type).eq(str).all():
            return set()
        strings = values.astype(str)
        if _all_match(strings, ISO_DATE):
            zone = _iso_zone(strings)
            if zone is None:
                return set()
            self.zones.add(zone)
            return {"iso"}
        if _all_match(strings, _YEAR_FIRST.pattern):
            return {"year_first"} if _parts_to_dates(strings, _YEAR_FIRST, "a", "b").notna().all() else set()
        if not _all_match(strings, _DAY_MONTH.pattern):
            return set()
        fits = {
            order
            for order, month, day in (("day_first", "b", "a"), ("month_first", "a", "b"))
            if _parts_to_dates(strings, _DAY_MONTH, month, day).notna().all()
        }
        if len(fits) == 2:
            parts = strings.str.extract(_DAY_MONTH.pattern)
            self.orders_differ = self.orders_differ or bool((parts["a"].astype(int) != parts["b"].astype(int)).any())
        return fits

    @property
    def ambiguous(self) -> bool:
        """Every value fits both day first and month first, and the two orders read different dates."""
        return self.readings == {"day_first", "month_first"} and self.orders_differ

    def reading(self, order: DateOrder) -> str | None:
        """How the column is read as dates, None when it is not (or is ambiguous and `order` is "auto")."""
        readings = self.readings or set()
        if "iso" in readings:
            return "iso" if len(self.zones) == 1 else None  # mixed time zones: kept as text
        if readings == {"day_first", "month_first"}:
            if order != "auto":
                return order
            return None if self.orders_differ else "day_first"  # both read the same dates
        return next(iter(readings)) if len(readings) == 1 else None


def _all_match(strings: pd.Series, pattern: str) -> bool:
    return bool(strings.head(CHECKED_FIRST).str.fullmatch(pattern).all() and strings.str.fullmatch(pattern).all())


def _iso_zone(strings: pd.Series) -> str | None:
    """The time zone of a column of ISO dates as parsed ("None" for dates without one), else None."""
    try:
        return str(getattr(pd.to_datetime(strings, format="ISO8601").dtype, "tz", None))
    except (ValueError, TypeError, OverflowError):
        return None  # e.g. mixed time zones: kept as text


def _number_readings(name: str, values: pd.Series) -> set[str]:
    """Excel day numbers or Unix times, for a column named like a date whose values all lie in the range."""
    if not any(word in name.lower() for word in DATE_WORDS):
        return set()
    low, high = float(values.min()), float(values.max())
    ranges = {"excel": EXCEL_DAYS, "unix_seconds": UNIX_SECONDS, "unix_milliseconds": UNIX_MILLISECONDS}
    return {reading for reading, (first, last) in ranges.items() if first <= low and high <= last}


def _parts_to_dates(strings: pd.Series, pattern: re.Pattern[str], month: str, day: str) -> pd.Series:
    """The dates the strings name with `month` and `day` the regex groups holding them; NaT where there is no such
    date (a 13th month, 30 February)."""
    parts = strings.str.extract(pattern.pattern)
    year = parts["year"].astype(float)
    year = year.where(year >= 100, year + 1900 + 100 * (year < 69))  # two digits: 69-99 -> 1900s, 00-68 -> 2000s
    fields = {
        "year": year,
        "month": parts[month].astype(float),
        "day": parts[day].astype(float),
        **{unit: parts[unit].astype(float).fillna(0) for unit in ("hour", "minute", "second")},
    }
    return pd.to_datetime(pd.DataFrame(fields, index=strings.index), errors="coerce")


def to_dates(values: pd.Series, reading: str) -> pd.Series:
    """A column's values as dates, read as `reading` (a reading `DateEvidence` found every value fits); missing
    values stay missing."""
    if reading == "iso":
        return pd.to_datetime(values, format="ISO8601")
    if reading in ("excel", "unix_seconds", "unix_milliseconds"):
        numbers = pd.to_numeric(values)
        if reading == "excel":
            return EXCEL_EPOCH + pd.to_timedelta(numbers, unit="D")
        return pd.to_datetime(numbers, unit="s" if reading == "unix_seconds" else "ms")
    present = values.notna()
    dates = pd.Series(pd.NaT, index=values.index, dtype="datetime64[us]")
    strings = values[present].astype(str)
    if reading == "year_first":
        dates[present] = _parts_to_dates(strings, _YEAR_FIRST, "a", "b")
    else:
        month, day = ("b", "a") if reading == "day_first" else ("a", "b")
        dates[present] = _parts_to_dates(strings, _DAY_MONTH, month, day)
    return dates


def ambiguous_date_columns(frame: pd.DataFrame) -> list[str]:
    """The columns of `frame` (e.g. an upload's first rows) whose dates could be written day first or month first:
    the ones to ask the analyst about."""
    found = []
    for column in frame.columns:
        evidence = DateEvidence(str(column))
        evidence.add(frame[column])
        if evidence.ambiguous:
            found.append(str(column))
    return found
