"""The stage contract and stage records: every stage (`Stage`, registered in `prisma_core.pipeline.stages`) leaves a
record, written after its artefacts, naming its parent (dataset -> embedding -> run's training -> keywords,
sub-themes, themes, families, their rebuilds, labels, placements, reports), its settings, the package versions and
the time."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

from prisma_core.store import StageRecord, Workspace, new_id
from prisma_core.store.stages import EMBEDDING, STAGE_TABLES


@dataclass(frozen=True)
class Stage:
    """One stage: its `name` (a constant of `prisma_core.store.stages`, which its records carry), the type of the
    settings its records hold (None: it records none) and `run`, its entry point, which stores what the stage makes,
    then its record (the stages of a training after its SAE return the record with what they made)."""

    name: str
    config: type | None
    run: Callable[..., Any]

    @property
    def tables(self) -> tuple[str, ...]:
        """The tables whose rows it makes, as the store's table registry declares them."""
        return STAGE_TABLES[self.name]


_VERSIONED_PACKAGES = ("torch", "sentence-transformers", "lancedb", "numpy")


def versions() -> dict[str, str]:
    from prisma_core import __version__

    return {"prisma": __version__} | {name: metadata.version(name) for name in _VERSIONED_PACKAGES}


def record_stage(
    workspace: Workspace,
    stage: str,
    parent_id: str,
    dataset_id: str,
    config: dict[str, Any],
    summary: dict[str, Any],
    run_id: str = "",
    record_id: str | None = None,
) -> StageRecord:
    """Write the record of a stage whose artefacts are stored (a new id unless `record_id` names what it made)."""
    record = StageRecord(
        record_id=record_id or new_id(stage[:5]),
        stage=stage,
        parent_id=parent_id,
        dataset_id=dataset_id,
        run_id=run_id,
        created_at=datetime.now(UTC).isoformat(),  # to the microsecond: two rebuilds in one second keep their order
        config=config,
        summary=summary,
        versions=versions(),
    )
    workspace.stage_records.add(record)
    return record


def embedding_parent(workspace: Workspace, dataset_id: str, embedding_key: str) -> str:
    """The id of the newest record of the dataset's embedding in this space; the dataset's id for vectors computed
    before stage records existed."""
    embeddings = [
        record.record_id
        for record in workspace.stage_records.of(dataset_id)
        if record.stage == EMBEDDING and record.summary.get("embedding_key") == embedding_key
    ]
    return embeddings[-1] if embeddings else dataset_id
