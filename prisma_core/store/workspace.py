"""One LanceDB database per workspace: datasets, documents, vectors, SAE runs and everything derived.

A workspace is a local folder (the default) or a prefix in an S3-compatible object store (`s3://bucket/folder`).
The store owns ids and run records. Artefacts are written first and the run record last, so a run that crashed
half-way never shows up as complete. Every write is a LanceDB commit (a new table version): a failed write leaves
the previous version readable.
"""

from __future__ import annotations

import hashlib
import os
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

from prisma_core.errors import StoreError
from prisma_core.store.artefacts import Activations, FeatureStats
from prisma_core.store.edits import Edits
from prisma_core.store.evidence import Evidence
from prisma_core.store.groups import Groups
from prisma_core.store.labels import Labels
from prisma_core.store.lancedb_import import import_lancedb
from prisma_core.store.location import OBJECT_STORE_SCHEME, Location, S3Settings, is_object_store
from prisma_core.store.passages import PassageStore
from prisma_core.store.repair import Repairs
from prisma_core.store.stages import StageRecords
from prisma_core.store.tables import Tables
from prisma_core.store.vectors import Vectors

WORKSPACE_ENV = "PRISMA_WORKSPACE"
LANCEDB_LOG_ENV = "LANCEDB_LOG"
"""LanceDB's own log level, "error" unless set: its warnings (an index partition left empty, a compaction another
writer pre-empted and left for later) are storage-engine notes an analyst cannot act on, printed among Prisma's
messages."""
DEFAULT_WORKSPACE = "prisma_data"
CACHE_ENV = "PRISMA_CACHE_DIR"


def resolve_workspace(where: str | Path | None = None) -> str:
    """The workspace's address: an s3:// URI as given, or the resolved local folder."""
    where = str(where or os.environ.get(WORKSPACE_ENV) or DEFAULT_WORKSPACE)
    if is_object_store(where):
        return OBJECT_STORE_SCHEME + where.removeprefix(OBJECT_STORE_SCHEME).strip("/")
    return str(Path(where).expanduser().resolve())


def local_folder_for(uri: str) -> Path:
    """The local folder of a workspace in an object store, for what must stay on this machine (the app's downloads,
    the demo corpus): under `$PRISMA_CACHE_DIR/workspaces`, else `$XDG_CACHE_HOME/prisma/workspaces`."""
    cache = os.environ.get(CACHE_ENV) or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "prisma"
    return Path(cache) / "workspaces" / hashlib.sha256(uri.encode()).hexdigest()[:16]


class Workspace(Vectors):
    """`lancedb/` holds the tables, `runs/<run_id>/` the SAE weights, both under `root` (a local folder or an object
    store prefix). `uri` names the workspace (what reopens it); `path` is its local folder: the workspace itself, or
    for one in an object store a local folder for downloads and caches.

    Its own methods are the datasets, their documents and vectors, and the runs (`Vectors`, `Datasets`, `Runs`,
    `Maintenance`); what a run derives and the records kept beside it are stores it holds, each reading and writing
    through its one `tables`: `passages`, `activations`, `feature_stats`, `labels`, `groups`, `evidence`, `edits`,
    `stage_records` and `repairs`."""

    def __init__(
        self, where: str | Path | None = None, storage_options: Mapping[str, Any] | None = None, create: bool = True
    ) -> None:
        """`create=False`: a local workspace folder that does not exist is a StoreError (a mistyped path), not a
        new empty workspace."""
        os.environ.setdefault(LANCEDB_LOG_ENV, "error")  # before lancedb starts its logger
        lancedb = import_lancedb()  # here, not at the top: commands that open no workspace (--help) do not pay it

        self.uri = resolve_workspace(where)
        if any(unicodedata.category(char) == "Cc" for char in self.uri):
            raise StoreError(
                f"The workspace's address {self.uri!r} holds a line break or another control character, which the "
                "storage engine cannot read: choose a folder name without one."
            )
        remote = is_object_store(self.uri)
        self.settings = S3Settings.resolve(storage_options) if remote else None
        self.root = Location.of(self.uri, self.settings)
        self.path = local_folder_for(self.uri) if remote else Path(self.uri)
        if not (remote or create or self.path.is_dir()):
            raise StoreError(
                f"There is no workspace at {self.uri}: check the path (`ingest` or `run` makes a new workspace)."
            )
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            if remote:
                self._check_reachable()
            options = self.settings.lance_options() if self.settings else None
            self.db = lancedb.connect(str(self.root / "lancedb"), storage_options=options)
        except OSError as error:
            raise StoreError(f"Cannot open the workspace folder {self.uri}: {error}") from error
        self.tables = Tables(self.uri, self.db)
        self.passages = PassageStore(self.tables)
        self.activations = Activations(self.tables)
        self.feature_stats = FeatureStats(self.tables)
        self.labels = Labels(self.tables)
        self.groups = Groups(self.tables)
        self.evidence = Evidence(self.tables)
        self.edits = Edits(self.tables)
        self.stage_records = StageRecords(self.tables)
        self.repairs = Repairs(self, self.stage_records)

    def delete_dataset(self, dataset_id: str) -> None:
        """The dataset (see `Datasets.delete_dataset`), then the passages of the texts no other dataset holds."""
        only_here = self.passages.texts_only_in(dataset_id)
        super().delete_dataset(dataset_id)
        self.passages.delete_texts(only_here)

    def location(self, where: str) -> Location:
        """A file or folder this workspace's runs name (a local path or an s3:// URI), reached with its settings."""
        return Location.of(where, self.settings)

    def _check_reachable(self) -> None:
        """One clear message when the object store cannot be reached, the keys are refused or the bucket is missing."""
        bucket = self.root.bucket
        try:
            found = self.root.fs.get_file_info(bucket).type
        except OSError as error:
            raise StoreError(
                f"Cannot open the workspace {self.uri}: the object store could not be reached or refused the keys "
                f"({_first_line(error)}). Check its address (AWS_ENDPOINT_URL), the keys (AWS_ACCESS_KEY_ID, "
                "AWS_SECRET_ACCESS_KEY) and the region (AWS_REGION)."
            ) from error
        if found == pafs.FileType.NotFound:
            raise StoreError(f"Cannot open the workspace {self.uri}: there is no bucket {bucket!r}; create it first.")


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
