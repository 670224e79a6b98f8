"""Reading and writing LanceDB tables: every write is one commit, retried on a conflict."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import pandas as pd
import pyarrow as pa

from prisma_core.errors import DamagedTableError, StoreError
from prisma_core.store.ids import check_id
from prisma_core.store.ownership import new_owner_note, note_is_gone
from prisma_core.store.retry import plain_reason, retry
from prisma_core.store.schemas import SCHEMAS, json_fields

if TYPE_CHECKING:
    import lancedb

Record = TypeVar("Record")


class Tables:
    """The tables of one workspace (`lancedb/` under its root, see `Workspace`): the one connection every store reads
    and writes through."""

    def __init__(self, uri: str, db: lancedb.DBConnection) -> None:
        self.uri = uri
        self.db = db

    def table(self, name: str, schema: pa.Schema | None = None) -> lancedb.table.Table:
        schema = schema or SCHEMAS[name]
        if self.has(name):
            table = self.db.open_table(name)
        else:
            table = retry(lambda: self.db.create_table(name, schema=schema, exist_ok=True), self.uri)
        if set(schema.names) - set(table.schema.names):
            retry(lambda: self._add_missing_columns(name, schema), self.uri)
            table = self.db.open_table(name)
        return table

    def _add_missing_columns(self, name: str, schema: pa.Schema) -> None:
        """A table made by an earlier version of Prisma gets the columns added since, empty for its rows."""
        table = self.db.open_table(name)
        missing = [field for field in schema if field.name not in table.schema.names]
        if missing:
            table.add_columns(missing)

    def has(self, name: str) -> bool:
        return name in self.db.list_tables().tables

    def read(self, name: str, where: str, columns: Sequence[str] | None = None) -> pd.DataFrame:
        if not self.has(name):
            return pd.DataFrame(columns=list(columns or SCHEMAS[name].names))
        with reading(name):
            table = self._open_listed(name)
            if table is None:
                return pd.DataFrame(columns=list(columns or SCHEMAS[name].names))
            query = table.search().where(where)
            if columns:
                return query.select(list(columns)).limit(None).to_pandas()
            frame = query.limit(None).to_pandas()
        return frame.reindex(columns=SCHEMAS[name].names) if name in SCHEMAS else frame

    def _open_listed(self, name: str) -> lancedb.table.Table | None:
        """A listed table, or None while another process is still creating it (listed, not yet openable: no rows)."""
        try:
            return self.db.open_table(name)
        except ValueError as error:
            if "was not found" not in str(error):
                raise
            return None

    def batches(self, name: str, query: Any, rows: int) -> Iterator[pa.RecordBatch]:
        """A query's result `rows` at a time; a damaged file met on the way raises DamagedTableError."""
        with reading(name):
            yield from query.limit(None).to_batches(rows)

    def records(self, name: str, where: str, record_type: type[Record]) -> list[Record]:
        """The matching rows of a record table as records, oldest first."""
        rows = self.read(name, where).to_dict(orient="records")
        decoded = json_fields(record_type)
        records = [record_type(**row | {key: json.loads(row[key]) for key in decoded}) for row in rows]
        return sorted(records, key=lambda record: record.created_at)

    def add(self, name: str, rows: pa.Table | Iterable[dict[str, Any]], schema: pa.Schema | None = None) -> None:
        table = self.table(name, schema)
        data = rows if isinstance(rows, pa.Table) else pa.Table.from_pylist(list(rows), schema=table.schema)
        if data.num_rows:
            # Re-open on every attempt: when two sessions create the same table at once, the loser's append conflicts
            # with the winner's create (an Overwrite) and only succeeds against the table as it now is.
            retry(lambda: self.db.open_table(name).add(data), self.uri)

    def delete(self, name: str, where: str, count_first: bool = True) -> None:
        """Deletes matching rows; nothing is committed (no disk space needed) when no row matches. `count_first=False`
        for a filter known to match that Lance cannot count (on `_rowid`)."""
        if self.has(name) and (not count_first or self.db.open_table(name).count_rows(where)):
            retry(lambda: self.db.open_table(name).delete(where), self.uri)  # re-opened: as in `swap`

    @contextlib.contextmanager
    def holding(self, name: str, where: str, column: str, busy: str) -> Iterator[None]:
        """Holds the row `where` selects in table `name` while the block runs: its `column` names this process (an
        owner note), else StoreError(`busy`) when another live process or thread holds it. Taking it is one
        compare-and-swap (an update whose filter requires the column empty: LanceDB applies concurrent updates one
        after the other, each re-checking its filter), so two can never both hold it, on a local disk or in an object
        store; a hold whose process ended without giving it back (killed) is taken over. The hold is read back once
        taken: when two processes make a table at once, LanceDB commits the later making as an overwrite, which can
        land after a hold taken on the first one and wipe it."""
        note = new_owner_note()
        if not self.swap(name, where, column, "", note):
            stale = self._holder(name, where, column)
            if not (stale and note_is_gone(stale) and self.swap(name, where, column, stale, note)):
                raise StoreError(busy)
        if self._holder(name, where, column) != note:
            raise StoreError(busy)
        try:
            yield
        finally:
            with contextlib.suppress(StoreError):
                self.swap(name, where, column, note, "")

    def swap(self, name: str, where: str, column: str, expected: str, value: str) -> bool:
        """Sets `column` of the rows `where` selects to `value` if it is `expected` ("" for none); whether it did."""
        held = (
            f"{column} = '{expected.replace(chr(39), chr(39) * 2)}'"
            if expected
            else f"({column} IS NULL OR {column} = '')"
        )
        self.table(name)  # a table from before the column was recorded gets it
        # Re-open on every attempt: an update based on a version that a concurrent overwrite has replaced conflicts
        # on every retry of the same table object.
        selected = f"{where} AND {held}"
        updated = retry(lambda: self.db.open_table(name).update(where=selected, values={column: value}), self.uri)
        return updated.rows_updated > 0

    def _holder(self, name: str, where: str, column: str) -> str:
        """Who holds the row `where` selects (an owner note), "" for no one."""
        current = self.read(name, where, [column])[column]
        return current.iloc[0] if len(current) and isinstance(current.iloc[0], str) else ""

    def table_versions(self, names: Sequence[str]) -> int:
        """The sum of these tables' versions: it grows with every commit to any of them, by any process."""
        return sum(self.db.open_table(name).version for name in names if self.has(name))

    def replace_generation(self, name: str, run_id: str, key: str, rows: Sequence[dict[str, Any]]) -> None:
        """Replace a run's rows of a table in one commit: the new generation is inserted and the old one deleted
        together.

        Two rebuilds at once (two sessions, the app and the CLI) are two merges; LanceDB applies them one after the
        other, so exactly one complete set survives and a reader never sees a mix or an empty set in between.
        """
        where = f"run_id = '{check_id(run_id)}'"
        old = self.read(name, where, ["generation"])["generation"]
        generation = int(old.max()) + 1 if len(old) else 0
        table = self.table(name)
        new = pa.Table.from_pylist(
            [row | {"run_id": run_id, "generation": generation} for row in rows], schema=table.schema
        )
        merge = (
            table.merge_insert(["run_id", "generation", key])
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .when_not_matched_by_source_delete(where)
        )
        retry(lambda: merge.execute(new), self.uri)

    def latest_generation(self, name: str, run_id: str, order: str) -> list[dict[str, Any]]:
        """A run's rows of a table as its last `replace_generation` left them, by `order`."""
        frame = self.read(name, f"run_id = '{check_id(run_id)}'")
        frame = frame[frame["generation"] == frame["generation"].max()].sort_values(order)
        return frame.drop(columns=["run_id", "generation"]).to_dict(orient="records")


@contextlib.contextmanager
def reading(name: str) -> Iterator[None]:
    """Reads of table `name`: a file LanceDB cannot read (truncated, removed) raises DamagedTableError naming it."""
    try:
        yield
    except (OSError, RuntimeError) as error:
        if isinstance(error, RuntimeError) and not str(error).startswith("lance error"):
            raise
        raise DamagedTableError(name, plain_reason(error)) from error
