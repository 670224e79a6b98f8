"""Read an analyst's files (tables, text files, PDFs, Word documents, zips of these) into one document table.

Pure: nothing is stored here. Every function returns a complete result or raises an IngestError that names the
file and the problem; `DocumentStream` (stream.py) yields documents a batch at a time and raises, naming the file,
when a later batch fails, so a caller that stores batches deletes them then (`Workspace.add_dataset_batches` does).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from prisma_core.ingest.archives import check_file_size, check_total_size, extension, regular_file, unpack
from prisma_core.ingest.columns import guess_id_column, guess_text_column, guess_title_column, text_column_problem
from prisma_core.ingest.config import SUPPORTED_EXTENSIONS, IngestConfig, Source
from prisma_core.ingest.documents import text_document
from prisma_core.ingest.readers import STREAMED_EXTENSIONS, read_file, table_batches
from prisma_core.ingest.stream import DocumentStream, IngestReport


@dataclass(frozen=True)
class IngestedDataset:
    documents: pd.DataFrame  # doc_id (str, unique), title (str or None), text (str), text_hash, metadata columns
    report: IngestReport


def read_sources(sources: Sequence[Source], config: IngestConfig = IngestConfig()) -> IngestedDataset:
    """Uploads read whole into one document table."""
    return _read_whole(DocumentStream.of_sources(sources, config))


def read_paths(paths: Sequence[str | Path], config: IngestConfig = IngestConfig()) -> IngestedDataset:
    """Like read_sources, for files on disk (Parquet, CSV, TSV and JSON lines read in batches, then put together)."""
    return _read_whole(DocumentStream.of_paths(paths, config))


def _read_whole(stream: DocumentStream) -> IngestedDataset:
    documents = pd.concat(list(stream.documents()), ignore_index=True)
    return IngestedDataset(documents, stream.report)


def preview_paths(paths: Sequence[str | Path], n_rows: int = 20) -> pd.DataFrame:
    """Like preview_sources, for files on disk: only the first batch of a Parquet, CSV, TSV or JSON lines file is
    read, whatever its size."""
    frames = []
    for path in map(Path, paths):
        if extension(path.name) in STREAMED_EXTENSIONS and path.is_file():
            frames.append(next(table_batches(path, IngestConfig(batch_rows=n_rows), []))[0].head(n_rows))
        else:
            frames.append(preview_sources(_sources_on_disk([path], IngestConfig()), n_rows))
    return pd.concat(frames, ignore_index=True).head(n_rows)


def _sources_on_disk(paths: Sequence[str | Path], config: IngestConfig) -> list[Source]:
    files = [Path(path) for path in paths]
    for path in files:
        check_file_size(regular_file(path).name, path.stat().st_size, config)
    check_total_size(sum(path.stat().st_size for path in files), config)
    return [(path.name, path.read_bytes()) for path in files]


def preview_sources(sources: Sequence[Source], n_rows: int = 20) -> pd.DataFrame:
    """The first rows of the files as read, before any column is chosen: the columns a user can pick from.

    Only those rows are read (a table of millions of rows previews as fast as a small one)."""
    config = IngestConfig(max_rows=n_rows)
    warnings: list[str] = []
    frames = []
    for name, data in (file for group in unpack(sources, config, warnings) for file in group):
        content = read_file(name, data, config, warnings)
        frames.append(
            content.head(n_rows)
            if isinstance(content, pd.DataFrame)
            else text_document(name, content).drop(columns="doc_id")
        )
    return pd.concat(frames, ignore_index=True).head(n_rows)


__all__ = [
    "SUPPORTED_EXTENSIONS",
    "DocumentStream",
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
    "text_column_problem",
]
