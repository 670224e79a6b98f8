"""SAE runs: a folder for the weights (local or in the object store) while a run is written, the run record last;
abandoned runs removed."""

from __future__ import annotations

import contextlib
import json
from dataclasses import replace
from pathlib import Path

from prisma_core.errors import NotFoundError, StoreError
from prisma_core.store.ids import ID_PATTERN, check_id, new_id
from prisma_core.store.location import Location, is_object_store
from prisma_core.store.maintenance import Maintenance
from prisma_core.store.ownership import mark_owner, owner_is_gone
from prisma_core.store.schemas import RunRecord
from prisma_core.store.stages import RECORDS, RUN_TABLES, TRAINING

CHANGING_RUN_TABLES = tuple(name for name in RUN_TABLES if name not in ("activations", "evidence", RECORDS))
"""The tables whose rows for a run change after training (labels, families, themes, sub-themes, edits, the run's
record): a view of the run is stale once any of them has a new version. Activations never change once written, and
a view never holds the evidence passages (read where shown)."""


class Runs(Maintenance):
    def _remove_abandoned_runs(self) -> None:
        """Removes what a run killed before its record was written left behind (its folder, any rows).

        A run still being written by a live process has a folder and no record too: only runs whose process is
        gone are removed. Best effort: a failure here never stops the new run.
        """
        with contextlib.suppress(OSError, StoreError):
            folders = [folder for folder in (self.root / "runs").folders() if ID_PATTERN.match(folder.name)]
            if not folders:
                return
            listed = set(self.tables.read("sae_runs", "true", ["run_id"])["run_id"]) | set(self.hidden_runs())
            for folder in folders:
                # The record is looked up again once the owner is known to be gone: it may have been written since.
                if folder.name not in listed and owner_is_gone(folder) and not self._has_run_record(folder.name):
                    self.delete_run(folder.name)

    def hidden_runs(self) -> list[str]:
        """Runs stored whole but missing from the runs table: their folder and their training stage record (written
        just before the run record, after everything else) are there, their record is not, e.g. because the runs
        table's newest version file was lost. Never removed as abandoned; `Repairs.repair` restores them."""
        folders = {folder.name for folder in (self.root / "runs").folders() if ID_PATTERN.match(folder.name)}
        if not folders:
            return []
        trained = set(self.tables.read(RECORDS, f"stage = '{TRAINING}'", ["run_id"])["run_id"]) & folders
        return sorted(trained - set(self.tables.read("sae_runs", "true", ["run_id"])["run_id"]))

    def _has_run_record(self, run_id: str) -> bool:
        return not self.tables.read("sae_runs", f"run_id = '{check_id(run_id)}'", ["run_id"]).empty

    def new_run_dir(self) -> tuple[str, Location]:
        """A folder for a new run's weights, marked with the process writing it.

        Starting a run is when what killed runs left behind is removed (see _remove_abandoned_runs): opening a
        workspace, listing or reading it never removes a run."""
        self._remove_abandoned_runs()
        run_id = new_id("run")
        folder = self.root / "runs" / run_id
        try:
            folder.make_folder()
            mark_owner(folder)
        except OSError as error:
            with contextlib.suppress(OSError):
                folder.remove()
            raise StoreError(f"Could not create the run folder {folder}: {error.strerror or error}.") from error
        return run_id, folder

    def add_run(self, record: RunRecord) -> None:
        """The record is written last: only a run whose artefacts are all stored is listed."""
        self.tables.add(
            "sae_runs",
            [
                {
                    "run_id": record.run_id,
                    "dataset_id": record.dataset_id,
                    "created_at": record.created_at,
                    "embedding_key": record.embedding_key,
                    "config": json.dumps(record.config),
                    "metrics": json.dumps(record.metrics),
                    "history": json.dumps(record.history),
                    "weights_dir": self._relative_to_workspace(record.weights_dir),
                    "versions": json.dumps(record.versions),
                }
            ],
        )
        self._reclaim_space_if_due()

    def _relative_to_workspace(self, path: str) -> str:
        """Paths inside the workspace are stored relative to it, so a moved or copied workspace keeps its runs."""
        if is_object_store(path):
            inside = path.startswith(f"{self.uri}/")
            return path.removeprefix(f"{self.uri}/") if inside else path
        return Path(path).relative_to(self.path).as_posix() if Path(path).is_relative_to(self.path) else path

    def _in_workspace(self, stored: str) -> str:
        """A stored path, resolved; an absolute one from a workspace since moved is looked up under runs/ here."""
        if is_object_store(stored):
            return stored
        path = Path(stored)
        if not path.is_absolute():
            return str(self.root / path.as_posix())
        return stored if path.exists() else str(self.root / "runs" / path.name)

    def runs(self, dataset_id: str | None = None) -> list[RunRecord]:
        where = f"dataset_id = '{check_id(dataset_id)}'" if dataset_id else "true"
        records = self.tables.records("sae_runs", where, RunRecord)
        return [replace(record, weights_dir=self._in_workspace(record.weights_dir)) for record in records]

    def run(self, run_id: str) -> RunRecord:
        runs = self.tables.read("sae_runs", f"run_id = '{check_id(run_id)}'")
        if runs.empty:
            raise NotFoundError(f"No SAE run {run_id!r} in workspace {self.path}.")
        return next(r for r in self.runs(runs["dataset_id"].iloc[0]) if r.run_id == run_id)

    def run_or_latest(self, run_id: str | None = None, dataset_id: str | None = None) -> RunRecord:
        """The run with this id; without one, the newest run (of this dataset, when given)."""
        if run_id:
            return self.run(run_id)
        runs = self.runs(dataset_id)
        if not runs:
            raise NotFoundError("No trained SAE run yet: train one first.")
        return runs[-1]

    def delete_run(self, run_id: str) -> None:
        """A listed run loses its record first, so a crash half-way shows no half-run. An unlisted one (a run that
        failed while being written, perhaps because the disk filled up) loses its folder first, which frees the
        space the table deletes need."""
        where = f"run_id = '{check_id(run_id)}'"
        if self._has_run_record(run_id):
            self.tables.delete("sae_runs", where)
        with contextlib.suppress(OSError):
            (self.root / "runs" / run_id).remove()
        for name in RUN_TABLES:
            if name != "sae_runs":
                self.tables.delete(name, where)
