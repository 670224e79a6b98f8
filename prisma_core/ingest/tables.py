"""A table's raw rows -> documents, batch by batch: what the choice of columns and types needs is first summed over
every batch (TableStats), so that each batch then becomes documents exactly as the whole table would (TablePlan)."""

from collections import Counter
from dataclasses import dataclass, field

import pandas as pd

from prisma_core.errors import IngestError
from prisma_core.ingest.columns import (
    CHECKED_ROWS,
    choose_columns,
    column_text,
    text_column_problem,
    text_lengths,
)
from prisma_core.ingest.config import IngestConfig
from prisma_core.ingest.dates import READING_WORDS, DateEvidence, to_dates
from prisma_core.ingest.readers import check_rows
from prisma_core.store.datasets import DOCUMENT_COLUMNS

RESERVED_COLUMNS = (*DOCUMENT_COLUMNS, "source_file")
_INTEGER_KINDS = frozenset("iu")


@dataclass(frozen=True)
class TablePlan:
    """How every batch of one table becomes documents."""

    columns: tuple[str, ...]  # the table's columns (a batch of JSON lines may lack some)
    text_column: str
    id_column: str | None
    title_column: str | None
    renames: dict[str, str]  # metadata columns named like a reserved column -> the name they are kept as
    date_columns: dict[str, str]  # columns read as dates -> how their dates are written (`dates.READING_WORDS`)
    source_file: str | None  # the file's name, as a metadata column, when several files are read
    metadata_kinds: dict[str, set[str]]  # metadata column (as kept) -> the numpy kinds of its batches ("i", "f"...)


@dataclass
class TableStats:
    """One table's rows summed up batch by batch: its row ids, and what choosing its columns and types needs."""

    name: str
    config: IngestConfig
    prefix: str  # of row-number ids: "notes:" when several files are read
    ids: list[str] = field(default_factory=list)
    columns: dict[str, None] = field(default_factory=dict)  # in order of appearance
    lengths: Counter[str] = field(default_factory=Counter)
    worded: set[str] = field(default_factory=set)
    kinds: dict[str, set[str]] = field(default_factory=dict)
    dates: dict[str, DateEvidence] = field(default_factory=dict)  # per column: whether it holds dates, written how
    first_rows: pd.DataFrame | None = None  # of the first batch: what `text_column_problem` looks at

    def add(self, frame: pd.DataFrame) -> None:
        check_rows(self.name, len(self.ids) + len(frame), self.config)
        self._refuse_lists(frame)
        if self.first_rows is None:
            self.first_rows = frame.head(4 * CHECKED_ROWS)
        id_column = self.config.id_column if self.config.id_column in frame.columns else None
        self.ids += row_ids(frame, id_column, self.prefix, len(self.ids) + 1)
        self.columns.update(dict.fromkeys(frame.columns))
        lengths, worded = text_lengths(frame)
        self.lengths.update(lengths)
        self.worded |= worded
        for column in frame.columns:
            self.kinds.setdefault(column, set()).add(frame[column].dtype.kind)
            self.dates.setdefault(column, DateEvidence(str(column))).add(frame[column])

    def _refuse_lists(self, frame: pd.DataFrame) -> None:
        """A text, id or title column must hold single values: a list would be stored as its shortened print."""
        named = (self.config.text_column, self.config.id_column, self.config.title_column)
        for column in (column for column in named if column in frame.columns):
            if frame[column].map(pd.api.types.is_list_like).any():
                raise IngestError(
                    f"{self.name}: column '{column}' holds lists, not text; choose another column, or join each "
                    "list into one text first"
                )

    def plan(self, several: bool, warnings: list[str]) -> TablePlan:
        columns = list(self.columns)
        text_column, id_column, title_column = choose_columns(
            self.name, columns, (self.lengths, self.worded), self.config, warnings
        )
        if self.first_rows is not None and text_column in self.first_rows.columns:
            problem = text_column_problem(self.first_rows[text_column], text_column)
            warnings.extend([f"{self.name}: {problem}"] if problem else [])
        metadata = [column for column in columns if column not in (text_column, id_column, title_column)]
        renames = {column: f"{column}_original" for column in metadata if column in RESERVED_COLUMNS}
        warnings.extend(f"{self.name}: column '{old}' kept as '{new}'" for old, new in renames.items())
        dates = self._date_columns(metadata, warnings)
        kinds = {renames.get(column, column): self.kinds[column] for column in metadata}
        kinds.update({renames.get(column, column): {"M"} for column in dates})
        source_file = self.name if several else None
        if source_file:
            kinds["source_file"] = {"O"}
        return TablePlan(tuple(columns), text_column, id_column, title_column, renames, dates, source_file, kinds)

    def _date_columns(self, metadata: list[str], warnings: list[str]) -> dict[str, str]:
        """The metadata columns read as dates, and how; a warning names each column whose dates are not ISO (to be
        checked) and each whose day and month order the analyst must choose."""
        order = self.config.date_order
        dates = {}
        for column in metadata:
            evidence = self.dates[column]
            if (reading := evidence.reading(order)) is not None:
                dates[column] = reading
                if reading != "iso":
                    warnings.append(f"{self.name}: column '{column}' read as {READING_WORDS[reading]}")
            elif evidence.ambiguous:
                warnings.append(
                    f"{self.name}: column '{column}' holds dates that could be written day first or month first "
                    "(every day is 12 or less): kept as text. To read them as dates, say which order they are "
                    "written in (the Datasets page asks; on the command line, --date-order day_first or month_first)"
                )
        return dates


def row_ids(frame: pd.DataFrame, id_column: str | None, prefix: str, first_row: int) -> list[str]:
    """The id column's values, else (and where empty) 1-based row numbers."""
    ids = pd.Series([f"{prefix}{row}" for row in range(first_row, first_row + len(frame))], dtype="str")
    if id_column:
        given = column_text(frame[id_column])
        ids = given.where(given.ne(""), ids)
    return ids.tolist()


def table_documents(frame: pd.DataFrame, plan: TablePlan, ids: list[str], float_columns: set[str]) -> pd.DataFrame:
    """doc_id, title, text, then the metadata columns (`float_columns` as floats: integers that the whole table, or
    the files together, hold with missing values)."""
    if tuple(frame.columns) != plan.columns:
        frame = frame.reindex(columns=list(plan.columns))
    titles = pd.Series([None] * len(frame), dtype=object)
    if plan.title_column:
        given = column_text(frame[plan.title_column])
        titles = given.astype(object).where(given.ne(""), None)
    text = column_text(frame[plan.text_column])
    documents = pd.DataFrame({"doc_id": pd.Series(ids, dtype="str"), "title": titles, "text": text})
    chosen = {plan.text_column, plan.id_column, plan.title_column} - {None}
    metadata = frame.drop(columns=list(chosen)).reset_index(drop=True)
    for column, reading in plan.date_columns.items():
        metadata[column] = to_dates(metadata[column], reading)
    metadata = metadata.rename(columns=plan.renames)
    if plan.source_file:
        metadata["source_file"] = plan.source_file
    for column in float_columns & set(metadata.columns):
        if metadata[column].dtype.kind in _INTEGER_KINDS:
            metadata[column] = metadata[column].astype(float)
    return pd.concat([documents, metadata], axis=1)


def float_columns(kinds: list[dict[str, set[str]]]) -> set[str]:
    """Metadata columns that concatenating every file's documents whole would turn from integers into floats: those
    that also hold floats (missing values), or that some file lacks."""
    every = set().union(*kinds) if kinds else set()
    floats = set()
    for column in every:
        seen = set().union(*(file.get(column, set()) for file in kinds))
        missing = any(column not in file for file in kinds)
        if seen & _INTEGER_KINDS and ("f" in seen or missing):
            floats.add(column)
    return floats
