"""Read an analyst's files (tables, text files, PDFs, Word documents, zips of these) into one document table.

Pure: nothing is stored here. Every function returns a complete result or raises an IngestError that names the
file and the problem, so the caller never persists half an upload.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from prisma_core.errors import IngestError
from prisma_core.ingest.archives import check_file_size, check_total_size, unpack
from prisma_core.ingest.columns import guess_id_column, guess_text_column, guess_title_column
from prisma_core.ingest.config import SUPPORTED_EXTENSIONS, IngestConfig, Source
from prisma_core.ingest.documents import documents_of, text_document, unique_ids
from prisma_core.ingest.readers import read_file


@dataclass(frozen=True)
class IngestReport:
    files: list[str]  # the files given, in order (a zip counts as one)
    n_documents: int
    empty_ids: list[str]  # empty, whitespace-only or missing texts: excluded from the documents, listed here
    duplicate_text_ids: list[str]  # documents whose text repeats an earlier document's: kept, listed here
    renamed_ids: dict[str, str]  # new id -> repeated original id it replaced ("7#2" -> "7")
    warnings: list[str] = field(default_factory=list)  # e.g. "notes.csv: not UTF-8, decoded as cp1252"


@dataclass(frozen=True)
class IngestedDataset:
    documents: pd.DataFrame  # doc_id (str, unique), title (str or None), text (str), then metadata columns
    report: IngestReport


def read_sources(sources: Sequence[Source], config: IngestConfig = IngestConfig()) -> IngestedDataset:
    warnings: list[str] = []
    files = unpack(sources, config, warnings)
    several = len(files) > 1
    parts = [documents_of(name, data, config, several, warnings) for name, data in files]
    documents = pd.concat(parts, ignore_index=True)
    ids, renamed_ids = unique_ids(documents["doc_id"].tolist())
    documents["doc_id"] = pd.Series(ids, dtype="str")
    empty = documents["text"].str.strip().eq("")
    empty_ids = documents.loc[empty, "doc_id"].tolist()
    documents = documents.loc[~empty].reset_index(drop=True)
    if documents.empty:
        raise IngestError(f"{', '.join(name for name, _ in sources)}: no non-empty documents were found")
    report = IngestReport(
        files=[name for name, _ in sources],
        n_documents=len(documents),
        empty_ids=empty_ids,
        duplicate_text_ids=documents.loc[documents["text"].duplicated(), "doc_id"].tolist(),
        renamed_ids=renamed_ids,
        warnings=warnings,
    )
    return IngestedDataset(documents, report)


def read_paths(paths: Sequence[str | Path], config: IngestConfig = IngestConfig()) -> IngestedDataset:
    """Like read_sources, for files on disk; sizes are checked before anything is read."""
    return read_sources(_sources_on_disk(paths, config), config)


def preview_paths(paths: Sequence[str | Path], n_rows: int = 20) -> pd.DataFrame:
    """Like preview_sources, for files on disk."""
    return preview_sources(_sources_on_disk(paths, IngestConfig()), n_rows)


def _sources_on_disk(paths: Sequence[str | Path], config: IngestConfig) -> list[Source]:
    files = [Path(path) for path in paths]
    for path in files:
        if not path.is_file():
            raise IngestError(f"{path}: file not found")
        check_file_size(path.name, path.stat().st_size, config)
    check_total_size(sum(path.stat().st_size for path in files), config)
    return [(path.name, path.read_bytes()) for path in files]


def preview_sources(sources: Sequence[Source], n_rows: int = 20) -> pd.DataFrame:
    """The first rows of the files as read, before any column is chosen: the columns a user can pick from.

    Only those rows are read (a table of millions of rows previews as fast as a small one)."""
    config = IngestConfig(max_rows=n_rows)
    warnings: list[str] = []
    frames = []
    for name, data in unpack(sources, config, warnings):
        content = read_file(name, data, config, warnings)
        frames.append(
            content.head(n_rows)
            if isinstance(content, pd.DataFrame)
            else text_document(name, content).drop(columns="doc_id")
        )
    return pd.concat(frames, ignore_index=True).head(n_rows)


__all__ = [
    "SUPPORTED_EXTENSIONS",
    "IngestConfig",
    "IngestReport",
    "IngestedDataset",
    "Source",
    "guess_id_column",
    "guess_text_column",
    "guess_title_column",
    "preview_paths",
    "preview_sources",
    "read_paths",
    "read_sources",
]
