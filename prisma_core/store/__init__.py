"""The workspace store: one LanceDB database per workspace, a local folder or an s3:// prefix (see `workspace`).

One job per module. Beneath the rest: `lancedb_import` (LanceDB without its unused REST client), `location` (where a
workspace lives, its files through pyarrow.fs, the object store's settings), `schemas` (tables and records), `ids`,
`retry` (commit conflicts), `ownership` (who writes a run folder) and `tables` (`Tables`: the one connection every
read and write goes through). The workspace's own methods: `maintenance` (disk space), `runs`, `datasets`, `vectors`
(embedding cache and search). The stores it holds, each on that one `Tables`: `passages` (the documents' passages, by
text), `artefacts` (a run's activations and feature statistics), `labels` (the features' labels), `groups`
(families, themes and sub-themes), `evidence` (the passages where each feature fires most), `edits` (the analyst's
renames, merges, hidden and pinned concepts), `stages` (the stage names, the tables each makes, and the records of
what each stage made from what), `repair` (a damaged workspace repaired). `workspace` puts them together.
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
