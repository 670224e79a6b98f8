"""The workspace store: one LanceDB database per workspace, a local folder or an s3:// prefix (see `workspace`).

One job per module: `lancedb_import` (LanceDB without its unused REST client), `location` (where a workspace lives,
its files through pyarrow.fs, the object store's settings), `schemas` (tables and records), `ids`, `retry` (commit
conflicts), `tables` (reads and writes), `maintenance` (disk space), `ownership` (who writes a run folder),
`datasets`, `vectors` (embedding cache and search), `passages` (the documents' passages, by text), `runs`, `artefacts`
(what a run derives), `evidence` (the passages where each feature fires most), `edits` (the analyst's renames, merges,
hidden and pinned concepts), `stages` (the stage names, the tables each makes, and what each stage made from what);
`workspace` puts them together.
"""

from prisma_core.memory import limit_malloc_heaps, share_arrow_memory
from prisma_core.store.ids import check_id, new_id, now_iso
from prisma_core.store.schemas import (
    DatasetRecord,
    EditRecord,
    Family,
    GroupLabel,
    NamedFamily,
    Passages,
    RunRecord,
    StageRecord,
)
from prisma_core.store.vectors import vectors_table_name
from prisma_core.store.workspace import WORKSPACE_ENV, Workspace, resolve_workspace

share_arrow_memory()  # freed Arrow buffers serve every library (prisma_core/memory.py)
limit_malloc_heaps()  # threads share a few heaps, whose freed pages they all reuse

__all__ = [
    "WORKSPACE_ENV",
    "DatasetRecord",
    "EditRecord",
    "Family",
    "GroupLabel",
    "NamedFamily",
    "Passages",
    "RunRecord",
    "StageRecord",
    "Workspace",
    "check_id",
    "new_id",
    "now_iso",
    "resolve_workspace",
    "vectors_table_name",
]
