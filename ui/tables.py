"""Tables a person clicks: clicking a row opens what the row shows."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd
import streamlit as st


def clickable_table(
    table: pd.DataFrame,
    key: str,
    id_column: str,
    columns: Mapping[str, Any],
    pick_key: str,
    on_pick: Callable[[int], None],
) -> int | None:
    """A table whose rows can be selected, one at a time, keyed `key` (`columns`: its column config). Returns the
    id (from `id_column`) of the selected row, if any, and opens it with `on_pick` when it differs from the last
    click (kept under `pick_key`), so a selection opens its row once, not on every rerun."""
    event = st.dataframe(
        table, hide_index=True, key=key, on_select="rerun", selection_mode="single-row", column_config=columns
    )
    rows = [row for row in event.selection.rows if row < len(table)]
    if not rows:
        return None
    picked = int(table[id_column].iloc[rows[0]])
    if st.session_state.get(pick_key) != picked:
        st.session_state[pick_key] = picked
        on_pick(picked)
    return picked


def rows_table(rows: Sequence[Mapping[str, Any]], key: str, columns: Mapping[str, Any]) -> None:
    """A read-only table of `rows` (one mapping of column -> value each), keyed `key`, with `columns` as its column
    config."""
    st.dataframe(pd.DataFrame(rows), hide_index=True, key=key, column_config=columns)
