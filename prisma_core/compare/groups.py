"""Compare groups: which metadata columns make useful groups, how values become groups (dates by year, quarter or
month; past MAX_GROUPS the smallest pooled), and the prevalence heatmap's order."""

from __future__ import annotations

import pandas as pd

MAX_GROUPS = 30
"""Past this many groups, the smallest are pooled as "(other)"."""
TOO_MANY_SHARE = 0.5
"""A column with distinct values for more than this share of documents (ids, DOIs, free text) makes no groups."""
DATE_BUCKETS = {"year": "Y", "quarter": "Q", "month": "M"}
"""How dates can be grouped: bucket name -> pandas period code."""
MISSING = "(missing)"
OTHER = "(other)"
LEFTOVER_GROUPS = (OTHER, MISSING)
"""Groups that are not a value of the column (the smallest groups pooled, documents without a value): listed last."""


def column_note(column: pd.Series) -> str:
    """How a metadata column would split the documents, in words, e.g. "5 groups" or "1,875 different values"."""
    n_values = int(column.nunique(dropna=True))
    if n_values > MAX_GROUPS:
        return f"{n_values:,} different values"
    return f"{n_values} group{'s' if n_values != 1 else ''}"


def too_many_values(column: pd.Series) -> bool:
    """Nearly one value per document: groups of one or two documents say nothing about their features."""
    n_values = int(column.nunique(dropna=True))
    return n_values > MAX_GROUPS and n_values > TOO_MANY_SHARE * max(len(column), 1)


def useful_columns(frame: pd.DataFrame) -> list[str]:
    """Metadata columns that make useful groups (datetime columns always do: they are bucketed)."""
    return [c for c in frame.columns if pd.api.types.is_datetime64_any_dtype(frame[c]) or not too_many_values(frame[c])]


def ordered_columns(frame: pd.DataFrame) -> list[str]:
    """Metadata columns, those that make useful groups first."""
    useful = useful_columns(frame)
    return [*useful, *[c for c in frame.columns if c not in useful]]


def group_values(column: pd.Series, date_bucket: str = "year") -> pd.Series:
    """Each document's group as text: its value, or for dates its year, quarter ("2024Q1") or month ("2024-03");
    MISSING where it has none. Nothing is pooled yet (see `pooled`)."""
    if pd.api.types.is_datetime64_any_dtype(column):
        column = column.dt.to_period(DATE_BUCKETS[date_bucket]).astype("string")
    return column.astype("string").fillna(MISSING)


def pooled(groups: pd.Series) -> pd.Series:
    """Past MAX_GROUPS groups, the smallest are pooled as OTHER."""
    counts = groups.value_counts()
    if len(counts) <= MAX_GROUPS:
        return groups
    return groups.where(groups.isin(counts.index[: MAX_GROUPS - 1]), OTHER)


def group_sizes(groups: pd.Series) -> pd.Series:
    """Documents per group, the largest first, then "(missing)" and the pooled "(other)" (in the order comparisons
    list them: `compare.prevalence.ranked`)."""
    counts = groups.value_counts()
    leftover = counts.index.isin(LEFTOVER_GROUPS)
    return pd.concat([counts[~leftover], counts[leftover].sort_index()])


def feature_order(feature_ids: pd.Series, names: pd.Series) -> list[str]:
    """Feature names in numeric order of their ids (not as text: #9 before #10)."""
    order = pd.DataFrame({"id": feature_ids.astype(int), "name": names}).drop_duplicates("id").sort_values("id")
    return order["name"].tolist()
