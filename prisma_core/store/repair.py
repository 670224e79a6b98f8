"""Repairing a damaged workspace: a table some of whose data files cannot be read loses the rows of those files only
(one commit deleting them, every intact row kept); a table that cannot be read even so goes back to its newest intact
version. A run or a dataset whose record a lost version held gets its record back from its stage records.

What the store cannot bring back is said, never hidden: the rows of the damaged files (named by the runs and datasets
that lost rows, which stay named until they are deleted) and a run's training curves (not in its stage record).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from prisma_core.store.datasets import Datasets, lost_documents
from prisma_core.store.ids import check_id
from prisma_core.store.retry import plain_reason, retry
from prisma_core.store.schemas import SCHEMAS, RunRecord, StageRecord
from prisma_core.store.stages import (
    AFTER_SAE_STAGES,
    FAMILIES,
    INGEST,
    REBUILT_STAGES,
    RECORDS,
    SETTINGS_STAGES,
    STAGE_TABLES,
    SUBTHEMES,
    THEMES,
    TRAINING,
    StageRecords,
    rebuilt_counts,
    shown_counts,
)
from prisma_core.store.tables import Tables, reading

if TYPE_CHECKING:
    import lancedb

BUSY_REPAIRING = "Another repair of this workspace is running: wait for it to end, then run repair again if needed."
CHECK_ROWS = 65_536
"""Rows read at a time when a table is checked in full."""
_FILE_BITS = 32
"""A row's address is its data file's number (a Lance fragment) shifted by this many bits, plus its offset there."""
_REBUILT = {THEMES: ("themes", THEMES), SUBTHEMES: ("sub-themes", THEMES), FAMILIES: ("families", FAMILIES)}
"""A run's groups a repair can lose (their stage: what they are called, the command that makes them again); each
stage makes one table."""


def unreadable(table: lancedb.table.Table) -> str:
    """Why the table's checked-out version cannot be read in full (every row, every column), or ""."""
    try:
        for _ in table.search().limit(None).to_batches(CHECK_ROWS):
            pass
    except (OSError, RuntimeError) as error:
        return plain_reason(error)
    return ""


@dataclass
class Repairs:
    """`Workspace.repairs`: it reads and restores the workspace's datasets and runs (its own methods), so it holds
    the workspace."""

    workspace: Datasets
    stage_records: StageRecords

    @property
    def tables(self) -> Tables:
        return self.workspace.tables

    def damaged_tables(self) -> dict[str, str]:
        """Every table whose newest version cannot be read in full, with the reason (reads every table whole)."""
        reasons = {name: unreadable(self.tables.db.open_table(name)) for name in self.tables.db.list_tables().tables}
        return {name: reason for name, reason in reasons.items() if reason}

    def repair(self) -> list[str]:
        """Removes the damaged files of every damaged table and restores every hidden run's record; one sentence per
        thing done or found that cannot be done, then one per run or dataset that lost rows (in this repair or an
        earlier one: they are named until deleted). One repair at a time (StoreError while another one runs): two
        would each restore the same records, or restore a version the other has just repaired. A workspace with
        nothing to repair is only read."""
        if self.damaged_tables() or self.hidden_datasets() or self.workspace.hidden_runs():
            self._add_locks()
            with self.tables.holding("locks", "name = 'repair'", "holder", BUSY_REPAIRING):
                report = [self._repair_table(name, reason) for name, reason in self.damaged_tables().items()]
                report += [self._restore_dataset_record(dataset_id) for dataset_id in self.hidden_datasets()]
                report += [self._restore_run_record(run_id) for run_id in self.workspace.hidden_runs()]
        else:
            report = []
        return report + [sentence for sentences in self.losses().values() for sentence in sentences]

    def _add_locks(self) -> None:
        """The locks table, made with its one row in one commit, so that the row a lock is taken on exists exactly
        once (two processes making it at once each commit it whole: the later one as an overwrite, which `holding`
        reads back for)."""
        rows = pa.table({"name": ["repair"], "holder": [""]}, schema=SCHEMAS["locks"])
        retry(lambda: self.tables.db.create_table("locks", data=rows, exist_ok=True), self.tables.uri)

    def losses(self) -> dict[str, list[str]]:
        """Every dataset and run that holds fewer rows than its records say (what a repair removed), by id, each
        loss in words with what to do about it."""
        losses: dict[str, list[str]] = {}
        for dataset in self.workspace.datasets():
            left = self.workspace.documents_left(dataset.dataset_id)
            if left < dataset.n_documents:
                losses[dataset.dataset_id] = [lost_documents(dataset.dataset_id, left, dataset.n_documents)]
        for run in self.workspace.runs():
            if sentences := self._run_losses(run):
                losses[run.run_id] = sentences
        return losses

    def _run_losses(self, run: RunRecord) -> list[str]:
        where = f"run_id = '{check_id(run.run_id)}'"
        features = self.tables.read("features", where, ["feature_id", "density"])
        metrics = run.metrics | rebuilt_counts(self.stage_records.of(run.dataset_id, run.run_id))
        activations = self._count("activations", where)
        parts = lost_run_parts(metrics, len(features), activations, int(features["density"].sum()))
        if parts:  # the run is to be trained again: what else it lost does not matter
            return [lost_run(run.run_id, parts)]
        sentences = []
        labelled = set(self.tables.read("interpretations", where, ["feature_id"])["feature_id"])
        unlabelled = len(set(features["feature_id"]) - labelled)
        if unlabelled:
            sentences.append(
                f"run {run.run_id}: the labels of {unlabelled} features are lost; they show as {LOST_LABEL!r} until "
                f"named again (`python -m prisma_core label --run {run.run_id}` with a model, or on the Labels page)"
            )
        lost_groups = [
            stage for stage in _REBUILT if metrics.get(f"n_{stage}") and not self._count(*STAGE_TABLES[stage], where)
        ]
        for command in dict.fromkeys(_REBUILT[name][1] for name in lost_groups):
            groups = " and ".join(_REBUILT[name][0] for name in lost_groups if _REBUILT[name][1] == command)
            sentences.append(
                f"run {run.run_id}: its {groups} are lost; `python -m prisma_core {command} --run {run.run_id}` "
                "makes them again"
            )
        return sentences

    def _repair_table(self, name: str, reason: str) -> str:
        """Deletes the rows of the table's damaged data files, keeping every intact row; when the table still cannot
        be read (its damage is not in a data file), restores its newest intact version."""
        table = self.tables.db.open_table(name)
        damaged = _damaged_files(table)
        if damaged:
            lost = sum(len(rows) for rows in damaged.values())
            where = " OR ".join(
                f"(_rowaddr >= {file << _FILE_BITS} AND _rowaddr < {(file + 1) << _FILE_BITS})" for file in damaged
            )
            retry(lambda: table.delete(where), self.tables.uri)
            if not unreadable(table):
                return (
                    f"{name}: damaged ({reason}); removed the {lost:,} rows of its {len(damaged)} damaged data "
                    f"file(s) and kept its {table.count_rows():,} intact rows"
                )
        return self._restore_intact_version(name, reason)

    def _restore_intact_version(self, name: str, reason: str) -> str:
        table = self.tables.db.open_table(name)
        latest = table.version
        for version in sorted((entry["version"] for entry in table.list_versions()), reverse=True)[1:]:
            table.checkout(version)
            if not unreadable(table):
                table.checkout_latest()
                retry(lambda version=version: table.restore(version), self.tables.uri)
                return (
                    f"{name}: damaged ({reason}); restored its version {version}, the newest intact one: what the "
                    f"{latest - version} later commit(s) wrote is lost"
                )
        table.checkout_latest()
        return (
            f"{name}: damaged ({reason}) and no intact earlier version is kept, so it cannot be restored; delete "
            "the datasets or runs it holds (`python -m prisma_core delete`) and make them again"
        )

    def hidden_datasets(self) -> list[str]:
        """Datasets stored whole but missing from the datasets table: their documents and their ingest stage record
        (written after the dataset record) are there, their record is not."""
        ingested = set(self.tables.read(RECORDS, f"stage = '{INGEST}'", ["dataset_id"])["dataset_id"])
        listed = set(self.tables.read("datasets", "true", ["dataset_id"])["dataset_id"])
        return sorted(dataset_id for dataset_id in ingested - listed if self._count("documents", _of(dataset_id)))

    def _restore_dataset_record(self, dataset_id: str) -> str:
        """A hidden dataset's record, rebuilt from its ingest stage record and its documents; its name was only in
        the lost record, so it is named after its first file."""
        stage = self.tables.records(
            RECORDS, f"stage = '{INGEST}' AND dataset_id = '{check_id(dataset_id)}'", StageRecord
        )[-1]
        files = [str(file) for file in stage.summary.get("files", [])] or [dataset_id]
        first = self.tables.read("documents", f"{_of(dataset_id)} AND position = 0", ["metadata"])["metadata"]
        record = {
            "dataset_id": dataset_id,
            "name": f"{PurePosixPath(files[0]).stem} (restored)",
            "created_at": stage.created_at,
            "n_documents": self._count("documents", _of(dataset_id)),
            "sources": json.dumps(files),
            "report": json.dumps({}),
            "metadata_columns": json.dumps(list(json.loads(first.iloc[0])) if len(first) else []),
        }
        self.tables.add("datasets", [record])
        return (
            f"dataset {dataset_id}: its record was missing from the datasets table (a lost version); restored from "
            f"its ingest stage record and its documents, named {record['name']!r}"
        )

    def _restore_run_record(self, run_id: str) -> str:
        """A hidden run's record, rebuilt from its stage records: its training's (its SAE's and embedding's settings,
        metrics and versions), those of the stages after its SAE written with it (their settings and counts) and its
        embedding's (its embedding space); its training curves are not kept there."""
        where = f"stage = '{TRAINING}' AND run_id = '{check_id(run_id)}'"
        stage = self.tables.records(RECORDS, where, StageRecord)[-1]
        parents = self.tables.records(RECORDS, f"record_id = '{check_id(stage.parent_id)}'", StageRecord)
        embedding_key = parents[0].summary.get("embedding_key") if parents else None
        if not embedding_key:
            return f"run {run_id}: its record is missing from the runs table and its embedding is not recorded"
        later = [
            record
            for record in self.tables.records(RECORDS, f"run_id = '{check_id(run_id)}'", StageRecord)
            if record.stage in AFTER_SAE_STAGES and record.created_at < stage.created_at  # not the rebuilds since
        ]
        counts = [shown_counts(record.summary) for record in later if record.stage in REBUILT_STAGES]
        sections = {record.stage: record.config for record in later if record.stage in SETTINGS_STAGES}
        self.workspace.add_run(
            RunRecord(
                run_id=run_id,
                dataset_id=stage.dataset_id,
                created_at=stage.created_at,
                embedding_key=embedding_key,
                config=stage.config | sections,
                metrics=stage.summary | {name: value for count in counts for name, value in count.items()},
                history=[],
                weights_dir=str(self.workspace.root / "runs" / run_id),
                versions=stage.versions,
            )
        )
        return (
            f"run {run_id}: its record was missing from the runs table (a lost version); restored from its training "
            "stage records, without its training curves"
        )

    def _count(self, name: str, where: str) -> int:
        with reading(name):
            return self.tables.db.open_table(name).count_rows(where) if self.tables.has(name) else 0


LOST_LABEL = "(label lost)"
"""What a feature whose every label a repair removed shows, until it is named again."""


def lost_run_parts(metrics: dict[str, Any], n_features: int, n_activations: int, n_counted: int) -> list[str]:
    """What a run cannot be shown without and has lost: features (fewer than it kept) and activations (fewer rows
    than its features' densities count: `n_counted`)."""
    parts = ["features"] if n_features < int(metrics.get("features_kept", 0)) else []
    return parts + (["activations"] if n_activations < n_counted else [])


def lost_run(run_id: str, parts: list[str]) -> str:
    """What to say of a run a repair left without some of its features or activations."""
    return (
        f"run {run_id}: its {' and '.join(parts)} are lost (they were in a damaged file a repair removed); delete it "
        f"(`python -m prisma_core delete --run {run_id}`, or on the Train SAE page) and train again"
    )


def _damaged_files(table: lancedb.table.Table) -> dict[int, np.ndarray]:
    """The table's data files that cannot be read, each with its rows' ids; empty when the rows cannot even be
    listed (then the damage is not in a data file). Listing row addresses reads no data file."""
    try:
        rows = table.search().with_row_id(True).select(["_rowaddr"]).limit(None).to_arrow()
    except (OSError, RuntimeError):
        return {}
    files = rows["_rowaddr"].to_numpy() >> _FILE_BITS
    ids = rows["_rowid"].to_numpy()
    return {int(file): ids[files == file] for file in np.unique(files) if not _reads(table, ids[files == file])}


def _reads(table: lancedb.table.Table, row_ids: np.ndarray) -> bool:
    """Whether these rows (of one data file) can be read, every column."""
    try:
        for start in range(0, len(row_ids), CHECK_ROWS):
            table.take_row_ids(row_ids[start : start + CHECK_ROWS].tolist()).to_arrow()
    except (OSError, RuntimeError):
        return False
    return True


def _of(dataset_id: str) -> str:
    return f"dataset_id = '{check_id(dataset_id)}'"
