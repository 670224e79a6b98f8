"""The workspace store: one LanceDB database per workspace folder (see `workspace`)."""

from prisma_core.store.workspace import (
    INDEX_MIN_ROWS,
    SEARCH_NPROBES,
    SEARCH_REFINE,
    WORKSPACE_ENV,
    DatasetRecord,
    RunRecord,
    Workspace,
    _vectors_table_name,
    check_id,
    new_id,
    now_iso,
    resolve_workspace,
)

__all__ = [
    "INDEX_MIN_ROWS",
    "SEARCH_NPROBES",
    "SEARCH_REFINE",
    "WORKSPACE_ENV",
    "DatasetRecord",
    "RunRecord",
    "Workspace",
    "_vectors_table_name",
    "check_id",
    "new_id",
    "now_iso",
    "resolve_workspace",
]
