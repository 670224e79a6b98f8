"""Which column of a table holds the text, the ids and the titles; cells as text."""

from typing import Any

import pandas as pd

from prisma_core.errors import IngestError
from prisma_core.ingest.config import IngestConfig

_TITLE_NAMES = ("title", "headline")
_ID_NAMES = ("id", "doc_id", "document_id", "identifier", "uid")


def guess_text_column(frame: pd.DataFrame) -> str:
    """The column with the longest mean text length (missing values count as empty) among those holding words."""
    scores = {}
    for column in frame.columns:
        strings = string_values(frame[column])
        if len(strings) and strings.str.contains(r"[^\W\d_]", regex=True).any():
            scores[column] = strings.str.len().sum() / len(frame)
    if not scores:
        raise IngestError(f"no text-like column; the columns are: {column_list(frame)}")
    return max(scores, key=scores.__getitem__)


def guess_id_column(frame: pd.DataFrame) -> str | None:
    """A column named like an id (id, doc_id, ...) whose values are all present and unique, else None (row numbers).

    The Datasets page pre-selects it and the command line uses it when no id column is given."""
    for column in frame.columns:
        if str(column).lower() in _ID_NAMES and frame[column].notna().all() and frame[column].is_unique:
            return str(column)
    return None


def choose_columns(
    name: str, frame: pd.DataFrame, config: IngestConfig, warnings: list[str]
) -> tuple[str, str | None, str | None]:
    """(text, id, title) columns: the configured ones, else the most text-like and a column named title/headline."""
    id_column = _named_column(name, frame, config.id_column)
    title_column = _named_column(name, frame, config.title_column)
    text_column = _named_column(name, frame, config.text_column)
    if text_column is None:
        candidates = frame.drop(columns=[column for column in (id_column, title_column) if column])
        try:
            text_column = guess_text_column(candidates)
        except IngestError as error:
            raise IngestError(f"{name}: {error}") from None
        warnings.append(f"{name}: text column auto-detected as '{text_column}'")
    if title_column is None:
        title_column = guess_title_column(frame, exclude={text_column, id_column})
    return text_column, id_column, title_column


def _named_column(name: str, frame: pd.DataFrame, column: str | None) -> str | None:
    if column is not None and column not in frame.columns:
        raise IngestError(f"{name}: no column named '{column}'; the columns are: {column_list(frame)}")
    return column


def guess_title_column(frame: pd.DataFrame, exclude: set[str | None] | None = None) -> str | None:
    """The first column named title or headline (any case, spaces ignored) that is not excluded, else None."""
    exclude = exclude or set()
    matches = [c for c in frame.columns if str(c).strip().lower() in _TITLE_NAMES and c not in exclude]
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


def column_list(frame: pd.DataFrame) -> str:
    return ", ".join(str(column) for column in frame.columns) or "(none)"
