"""Repairing a damaged workspace: a table whose newest files cannot be read goes back to its newest intact version,
and a run or a dataset whose record a lost version held gets its record back from its stage records.

What the store cannot bring back is said, never hidden: the rows of the commits after the intact version (named by
the runs and datasets that lost rows), and a run's training curves (not in its stage record).
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from prisma_core.store.datasets import Datasets
from prisma_core.store.ids import check_id
from prisma_core.store.retry import plain_reason, retry
from prisma_core.store.schemas import RunRecord, StageRecord
from prisma_core.store.stages import AFTER_SAE_STAGES, REBUILT_STAGES, TRAINING_STAGE, shown_counts

if TYPE_CHECKING:
    import lancedb

CHECK_ROWS = 65_536
"""Rows read at a time when a table is checked in full."""
_RUN_TABLES = ("activations", "features")
"""Tables every run has rows in: a run without any there has lost them."""


def unreadable(table: lancedb.table.Table) -> str:
    """Why the table's checked-out version cannot be read in full (every row, every column), or ""."""
    try:
        for _ in table.search().limit(None).to_batches(CHECK_ROWS):
            pass
    except (OSError, RuntimeError) as error:
        return plain_reason(error)
    return ""


class Repairs(Datasets):
    def damaged_tables(self) -> dict[str, str]:
        """Every table whose newest version cannot be read in full, with the reason (reads every table whole)."""
        reasons = {name: unreadable(self.db.open_table(name)) for name in self.db.list_tables().tables}
        return {name: reason for name, reason in reasons.items() if reason}

    def repair(self) -> list[str]:
        """Restores every damaged table's newest intact version and every hidden run's record; one sentence per
        thing done or found that cannot be done, then one per run or dataset that lost rows."""
        report = [self._restore_intact_version(name, reason) for name, reason in self.damaged_tables().items()]
        report += [self._restore_dataset_record(dataset_id) for dataset_id in self.hidden_datasets()]
        report += [self._restore_run_record(run_id) for run_id in self.hidden_runs()]
        return report + (self._incomplete() if report else [])

    def _restore_intact_version(self, name: str, reason: str) -> str:
        table = self.db.open_table(name)
        latest = table.version
        for version in sorted((entry["version"] for entry in table.list_versions()), reverse=True)[1:]:
            table.checkout(version)
            if not unreadable(table):
                table.checkout_latest()
                retry(lambda version=version: table.restore(version), self.uri)
                return (
                    f"{name}: damaged ({reason}); restored its version {version}, the newest intact one: what the "
                    f"{latest - version} later commit(s) wrote is lost"
                )
        table.checkout_latest()
        return (
            f"{name}: damaged ({reason}) and no intact earlier version is kept, so it cannot be restored; delete "
            "the datasets or runs it holds and create them again"
        )

    def hidden_datasets(self) -> list[str]:
        """Datasets stored whole but missing from the datasets table: their documents and their ingest stage record
        (written after the dataset record) are there, their record is not."""
        ingested = set(self._read("stages", "stage = 'ingest'", ["dataset_id"])["dataset_id"])
        listed = set(self._read("datasets", "true", ["dataset_id"])["dataset_id"])
        return sorted(dataset_id for dataset_id in ingested - listed if self._count("documents", _of(dataset_id)))

    def _restore_dataset_record(self, dataset_id: str) -> str:
        """A hidden dataset's record, rebuilt from its ingest stage record and its documents; its name was only in
        the lost record, so it is named after its first file."""
        stage = self._records("stages", f"stage = 'ingest' AND dataset_id = '{check_id(dataset_id)}'", StageRecord)[-1]
        files = [str(file) for file in stage.summary.get("files", [])] or [dataset_id]
        first = self._read("documents", f"{_of(dataset_id)} AND position = 0", ["metadata"])["metadata"]
        record = {
            "dataset_id": dataset_id,
            "name": f"{PurePosixPath(files[0]).stem} (restored)",
            "created_at": stage.created_at,
            "n_documents": self._count("documents", _of(dataset_id)),
            "sources": json.dumps(files),
            "report": json.dumps({}),
            "metadata_columns": json.dumps(list(json.loads(first.iloc[0])) if len(first) else []),
        }
        self._add("datasets", [record])
        return (
            f"dataset {dataset_id}: its record was missing from the datasets table (a lost version); restored from "
            f"its ingest stage record and its documents, named {record['name']!r}"
        )

    def _restore_run_record(self, run_id: str) -> str:
        """A hidden run's record, rebuilt from its stage records: its training's (its SAE's and embedding's settings,
        metrics and versions), those of the stages after its SAE written with it (their settings and counts) and its
        embedding's (its embedding space); its training curves are not kept there."""
        where = f"stage = '{TRAINING_STAGE}' AND run_id = '{check_id(run_id)}'"
        stage = self._records("stages", where, StageRecord)[-1]
        parents = self._records("stages", f"record_id = '{check_id(stage.parent_id)}'", StageRecord)
        embedding_key = parents[0].summary.get("embedding_key") if parents else None
        if not embedding_key:
            return f"run {run_id}: its record is missing from the runs table and its embedding is not recorded"
        later = [
            record
            for record in self._records("stages", f"run_id = '{check_id(run_id)}'", StageRecord)
            if record.stage in AFTER_SAE_STAGES and record.created_at < stage.created_at  # not the rebuilds since
        ]
        counts = [shown_counts(record.summary) for record in later if record.stage in REBUILT_STAGES]
        self.add_run(
            RunRecord(
                run_id=run_id,
                dataset_id=stage.dataset_id,
                created_at=stage.created_at,
                embedding_key=embedding_key,
                config=stage.config | {record.stage: record.config for record in later},
                metrics=stage.summary | {name: value for count in counts for name, value in count.items()},
                history=[],
                weights_dir=str(self.root / "runs" / run_id),
                versions=stage.versions,
            )
        )
        return (
            f"run {run_id}: its record was missing from the runs table (a lost version); restored from its training "
            "stage records, without its training curves"
        )

    def _incomplete(self) -> list[str]:
        """Runs and datasets that lost rows (after a table was restored to an older version)."""
        lost = []
        for dataset in self.datasets():
            stored = self._count("documents", _of(dataset.dataset_id))
            if stored != dataset.n_documents:
                lost.append(
                    f"dataset {dataset.dataset_id}: {stored:,} of its {dataset.n_documents:,} documents are left; "
                    "delete it and ingest its files again"
                )
        for run in self.runs():
            where = f"run_id = '{check_id(run.run_id)}'"
            missing = [name for name in _RUN_TABLES if not self._count(name, where)]
            if missing:
                lost.append(f"run {run.run_id}: its {' and '.join(missing)} are lost; delete it and train again")
        return lost

    def _count(self, name: str, where: str) -> int:
        return self.db.open_table(name).count_rows(where) if self._has_table(name) else 0


def _of(dataset_id: str) -> str:
    return f"dataset_id = '{check_id(dataset_id)}'"
