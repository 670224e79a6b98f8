"""Which column of a table holds the text, the ids and the titles; cells as text."""

from collections.abc import Mapping, Sequence, Set
from typing import Any

import pandas as pd

from prisma_core.errors import IngestError
from prisma_core.ingest.config import IngestConfig

_TITLE_NAMES = ("title", "headline")
_ID_NAMES = ("id", "doc_id", "document_id", "identifier", "uid")


def guess_text_column(frame: pd.DataFrame) -> str:
    """The column with the longest mean text length (missing values count as empty) among those holding words."""
    lengths, worded = text_lengths(frame)
    return best_text_column([str(column) for column in frame.columns], lengths, worded)


def text_lengths(frame: pd.DataFrame) -> tuple[dict[str, int], set[str]]:
    """Per column, the summed length of its string values; and the columns with a string holding a letter.

    Summed over a table's batches, they choose the same column as the whole table would."""
    lengths, worded = {}, set()
    for column in frame.columns:
        strings = string_values(frame[column])
        lengths[str(column)] = int(strings.str.len().sum()) if len(strings) else 0
        if len(strings) and strings.str.contains(r"[^\W\d_]", regex=True).any():
            worded.add(str(column))
    return lengths, worded


def best_text_column(columns: Sequence[str], lengths: Mapping[str, int], worded: Set[str]) -> str:
    """The worded column with the most text (every column has as many rows: the longest sum is the longest mean)."""
    scores = {column: lengths[column] for column in columns if column in worded}
    if not scores:
        raise IngestError(f"no text-like column; the columns are: {', '.join(columns) or '(none)'}")
    return max(scores, key=scores.__getitem__)


CHECKED_ROWS = 500
"""Rows of the chosen text column `text_column_problem` looks at (the first ones)."""
CATEGORY_SHARE = 0.25
"""A text column whose first rows hold fewer different values than this share of them looks like a category."""
MIN_CHECKED = 20
"""Rows needed before the share of different values says anything."""
SHORT_WORDS = 2
"""A text column whose values have at most this many words (the median) looks like an id or a code."""


def text_column_problem(column: pd.Series, name: str) -> str | None:
    """What looks wrong, in plain words, with `column` (the chosen text column, named `name`) as the documents'
    text: a category (few different values) or an id or code (very short values); None when it looks like text.
    Only the first CHECKED_ROWS non-empty values are looked at, so the check is quick before any work."""
    values = column_text(column.head(4 * CHECKED_ROWS)).str.strip()
    values = values[values.ne("")].head(CHECKED_ROWS)
    if values.empty:
        return None
    distinct = values.unique()
    examples = ", ".join(f"“{value[:30]}”" for value in distinct[:3])
    advice = (
        "Prisma finds concepts in running text (notes, articles, abstracts): choose the column that holds it, "
        "otherwise the concepts found will only repeat these values."
    )
    if len(values) >= MIN_CHECKED and len(distinct) < CATEGORY_SHARE * len(values):
        return (
            f"The text column “{name}” looks like a category, not text: its first {len(values):,} documents hold "
            f"only {len(distinct):,} different value{'s' if len(distinct) > 1 else ''} ({examples}…). {advice}"
        )
    if values.str.split().str.len().median() <= SHORT_WORDS:
        return (
            f"The text column “{name}” holds very short values ({examples}…), like ids, codes or categories, not "
            f"text. {advice}"
        )
    return None


def guess_id_column(frame: pd.DataFrame) -> str | None:
    """A column named like an id (id, doc_id, ...) whose values are all present and unique, else None (row numbers).

    The Datasets page pre-selects it and the command line uses it when no id column is given."""
    for column in frame.columns:
        if str(column).lower() in _ID_NAMES and frame[column].notna().all() and frame[column].is_unique:
            return str(column)
    return None


def choose_columns(
    name: str,
    columns: Sequence[str],
    text_scores: tuple[Mapping[str, int], Set[str]],
    config: IngestConfig,
    warnings: list[str],
) -> tuple[str, str | None, str | None]:
    """(text, id, title) columns: the configured ones, else the most text-like (by `text_lengths`, summed over the
    table) and a column named title/headline."""
    id_column = _named_column(name, columns, config.id_column)
    title_column = _named_column(name, columns, config.title_column)
    text_column = _named_column(name, columns, config.text_column)
    if text_column is None:
        candidates = [column for column in columns if column not in (id_column, title_column)]
        try:
            text_column = best_text_column(candidates, *text_scores)
        except IngestError as error:
            raise IngestError(f"{name}: {error}") from None
        warnings.append(f"{name}: text column auto-detected as '{text_column}'")
    if title_column is None:
        title_column = _title_among(columns, exclude={text_column, id_column})
    return text_column, id_column, title_column


def _named_column(name: str, columns: Sequence[str], column: str | None) -> str | None:
    if column is not None and column not in columns:
        raise IngestError(f"{name}: no column named '{column}'; the columns are: {', '.join(columns) or '(none)'}")
    return column


def guess_title_column(frame: pd.DataFrame, exclude: set[str | None] | None = None) -> str | None:
    """The first column named title or headline (any case, spaces ignored) that is not excluded, else None."""
    return _title_among(list(frame.columns), exclude or set())


def _title_among(columns: Sequence[str], exclude: set[str | None]) -> str | None:
    matches = [c for c in columns if str(c).strip().lower() in _TITLE_NAMES and c not in exclude]
    return matches[0] if matches else None


def string_values(column: pd.Series) -> pd.Series:
    """The non-missing string values of a column (object columns can mix strings with numbers)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        column = column.astype(object)
    if isinstance(column.dtype, pd.StringDtype):
        return column.dropna()
    if column.dtype != object:
        return column.iloc[:0].astype("str")
    values = column.dropna()
    return values[values.map(type).eq(str)].astype("str")


def column_text(column: pd.Series) -> pd.Series:
    """A column as text, "" where missing (vectorised for string columns)."""
    if isinstance(column.dtype, pd.StringDtype):
        return column.fillna("").reset_index(drop=True)
    return pd.Series([_cell_text(value) for value in column], dtype="str")


def _cell_text(value: Any) -> str:
    """A cell as text: missing -> "", 7.0 -> "7", bytes decoded, anything else as str()."""
    if value is None or (pd.api.types.is_scalar(value) and pd.isna(value)):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)
