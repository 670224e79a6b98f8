"""Files -> documents in batches, so that memory holds about one batch of rows whatever the files' size.

Two passes. The first reads every row of every file, checks it (encodings, JSON, row limits) and sums up what the
choice of the text, title and date columns needs (tables.TableStats); ids are then made unique over all files. The
second reads the rows again and yields documents a batch at a time, exactly as the files read whole would give them.
Parquet, CSV, TSV and JSON lines files on disk are read `IngestConfig.batch_rows` rows at a time; other files (and
every upload) are read whole, once, as one batch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pandas as pd

from prisma_core.errors import IngestError
from prisma_core.ingest.archives import (
    check_extension,
    check_file_size,
    check_not_empty,
    check_total_size,
    extension,
    regular_file,
    unpack,
)
from prisma_core.ingest.config import IngestConfig, Source
from prisma_core.ingest.documents import check_lengths, text_document, unique_ids
from prisma_core.ingest.readers import STREAMED_EXTENSIONS, check_declared_rows, read_file, table_batches
from prisma_core.ingest.tables import TablePlan, TableStats, float_columns, table_documents
from prisma_core.progress import Progress, ProgressCallback, ignore_progress
from prisma_core.store.datasets import with_text_hashes

Content = tuple[pd.DataFrame | str, int]  # a raw table batch, or a text file's text; and the file's bytes read so far


@dataclass(frozen=True)
class IngestReport:
    files: list[str]  # the files given, in order (a zip counts as one)
    n_documents: int
    empty_ids: list[str]  # empty, whitespace-only or missing texts: excluded from the documents, listed here
    duplicate_text_ids: list[str]  # documents whose text repeats an earlier document's: kept, listed here
    renamed_ids: dict[str, str]  # new id -> repeated original id it replaced ("7#2" -> "7")
    warnings: list[str]  # e.g. "notes.csv: not UTF-8, decoded as cp1252"


@dataclass(frozen=True)
class _File:
    name: str
    size: int
    contents: Callable[[list[str]], Iterator[Content]]  # reads the file again at every call


class _WholeFile:
    """A file read whole: parsed at the first call, kept for the second."""

    def __init__(self, name: str, data: bytes, config: IngestConfig) -> None:
        self.name, self.data, self.config = name, data, config
        self.content: pd.DataFrame | str | None = None

    def __call__(self, warnings: list[str]) -> Iterator[Content]:
        if self.content is None:
            if extension(self.name) == ".xlsx":
                check_declared_rows(self.name, self.data, self.config)
            self.content = read_file(self.name, self.data, self.config, warnings)
        yield self.content, len(self.data)


class DocumentStream:
    """`documents()` yields the documents batch by batch (each after the previous one was used: ids final, empty
    texts left out); `report` is complete once they all were. Reports progress as "check" (first pass, in bytes
    read) and "ingest" (second pass, in rows)."""

    def __init__(
        self,
        names: list[str],
        files: list[_File],
        config: IngestConfig,
        progress: ProgressCallback,
        warnings: list[str],
    ) -> None:
        self.names, self.files, self.config, self.progress = names, files, config, progress
        self.warnings = warnings  # those of unpacking zips, before any file is read
        self._report: IngestReport | None = None

    @property
    def report(self) -> IngestReport:
        if self._report is None:
            raise RuntimeError("the report is complete once every batch of documents was read")
        return self._report

    @classmethod
    def of_sources(
        cls, sources: Sequence[Source], config: IngestConfig, progress: ProgressCallback = ignore_progress
    ) -> DocumentStream:
        """Uploads: (name, bytes), read whole; zips replaced by their members."""
        _check_given(sources)
        warnings: list[str] = []
        files = [_whole(name, data, config) for group in unpack(sources, config, warnings) for name, data in group]
        return cls([name for name, _ in sources], files, config, progress, warnings)

    @classmethod
    def of_paths(
        cls, paths: Sequence[str | Path], config: IngestConfig, progress: ProgressCallback = ignore_progress
    ) -> DocumentStream:
        """Files on disk: Parquet, CSV, TSV and JSON lines read in batches (no size limit), the others whole (their
        sizes checked before anything is read)."""
        _check_given(paths)
        found = [_existing(path) for path in paths]
        whole = [path for path in found if extension(path.name) not in STREAMED_EXTENSIONS]
        for path in whole:
            check_file_size(path.name, path.stat().st_size, config)
        check_total_size(sum(path.stat().st_size for path in whole), config)
        warnings: list[str] = []
        unpacked = iter(unpack([(path.name, path.read_bytes()) for path in whole], config, warnings))
        files = []
        for path in found:
            if path in whole:
                files += [_whole(name, data, config) for name, data in next(unpacked)]
            else:
                check_not_empty(path.name, path.stat().st_size)
                batches = functools.partial(table_batches, path, config)
                files.append(_File(path.name, path.stat().st_size, batches))
        return cls([path.name for path in found], files, config, progress, warnings)

    def documents(self) -> Iterator[pd.DataFrame]:
        warnings = list(self.warnings)
        plans, given_ids = self._check(warnings)
        ids, renamed_ids = unique_ids(given_ids)
        del given_ids
        kinds = [plan.metadata_kinds if plan else _TEXT_KINDS for plan in plans]
        floats = float_columns(kinds)
        columns = _all_columns(kinds)
        empty_ids: list[str] = []
        duplicates: list[str] = []
        seen: set[bytes] = set()
        done = 0
        for file, plan in zip(self.files, plans, strict=True):
            for content, _ in file.contents([]):
                n_rows = 1 if isinstance(content, str) else len(content)
                documents = _documents(file.name, content, plan, ids[done : done + n_rows], floats)
                check_lengths(file.name, documents, self.config)
                done += len(documents)
                documents = documents.reindex(columns=columns) if len(self.files) > 1 else documents
                empty = documents["text"].str.strip().eq("")
                empty_ids += documents.loc[empty, "doc_id"].tolist()
                documents = with_text_hashes(documents.loc[~empty].reset_index(drop=True))
                duplicates += _repeated(documents, seen)
                yield documents
                self.progress(Progress("ingest", done, len(ids), f"{done:,} of {len(ids):,} rows stored"))
        if done != len(ids):
            raise IngestError(f"{', '.join(self.names)}: the files changed while they were read")
        if done == len(empty_ids):
            raise IngestError(f"{', '.join(self.names)}: no non-empty documents were found")
        self._report = IngestReport(self.names, done - len(empty_ids), empty_ids, duplicates, renamed_ids, warnings)

    def _check(self, warnings: list[str]) -> tuple[list[TablePlan | None], list[str]]:
        """First pass: every file's plan (None: a text file), and the ids of all files as given."""
        several = len(self.files) > 1
        total, before = sum(file.size for file in self.files), 0
        plans: list[TablePlan | None] = []
        ids: list[str] = []
        for file in self.files:
            stats = TableStats(file.name, self.config, f"{PurePosixPath(file.name).stem}:" if several else "")
            text = False
            for content, read in file.contents(warnings):
                if isinstance(content, str):
                    text = True
                else:
                    stats.add(content)
                self.progress(Progress("check", before + read, total, f"{len(stats.ids):,} rows of {file.name}"))
            before += file.size
            plans.append(None if text else stats.plan(several, warnings))
            ids += [file.name] if text else stats.ids
        return plans, ids


def _existing(path: str | Path) -> Path:
    path = regular_file(Path(path))
    check_extension(path.name)
    return path


def _whole(name: str, data: bytes, config: IngestConfig) -> _File:
    return _File(name, len(data), _WholeFile(name, data, config))


def _documents(
    name: str, content: pd.DataFrame | str, plan: TablePlan | None, ids: list[str], floats: set[str]
) -> pd.DataFrame:
    if isinstance(content, str):
        return text_document(name, content).assign(doc_id=ids)
    assert plan is not None  # made for every table by the first pass
    if len(ids) < len(content):
        raise IngestError(f"{name}: the file changed while it was read")
    return table_documents(content, plan, ids, floats)


_TEXT_KINDS = {"source_file": {"O"}}
"""The metadata of a text file's document: its file name."""


def _check_given(files: Sequence[object]) -> None:
    if not files:
        raise IngestError("no files were given")


def _all_columns(kinds: list[dict[str, set[str]]]) -> list[str]:
    """doc_id, title, text, then every file's metadata columns in order of appearance (as concatenating would)."""
    columns = dict.fromkeys(["doc_id", "title", "text"])
    for file in kinds:
        columns.update(dict.fromkeys(file))
    return list(columns)


def _repeated(documents: pd.DataFrame, seen: set[bytes]) -> list[str]:
    """The ids of documents whose text was seen before, by their `text_hash` (its first 128 bits kept per distinct
    text)."""
    repeated = []
    for doc_id, hashed in zip(documents["doc_id"], documents["text_hash"], strict=True):
        digest = bytes.fromhex(hashed[:32])
        if digest in seen:
            repeated.append(doc_id)
        seen.add(digest)
    return repeated
