"""Raw content -> documents: one per table row or per text file, with ids, titles and typed metadata."""

from pathlib import PurePosixPath

import pandas as pd

from prisma_core.errors import IngestError
from prisma_core.ingest.archives import extension
from prisma_core.ingest.columns import choose_columns, column_text, string_values
from prisma_core.ingest.config import IngestConfig
from prisma_core.ingest.readers import check_declared_rows, check_rows, read_file

_RESERVED_COLUMNS = ("doc_id", "title", "text", "source_file")
_ISO_DATE = r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?"


def documents_of(name: str, data: bytes, config: IngestConfig, several: bool, warnings: list[str]) -> pd.DataFrame:
    if extension(name) == ".xlsx":
        check_declared_rows(name, data, config)
    content = read_file(name, data, config, warnings)
    if isinstance(content, pd.DataFrame):
        check_rows(name, len(content), config)
        documents = _table_documents(name, content, config, several, warnings)
    else:
        documents = text_document(name, content)
    _check_lengths(name, documents, config)
    return documents


def text_document(name: str, text: str) -> pd.DataFrame:
    """A text-like file is one document; its id is the file name (the path inside a zip)."""
    return pd.DataFrame(
        {
            "doc_id": pd.Series([name], dtype="str"),
            "title": pd.Series([PurePosixPath(name).stem], dtype=object),
            "text": pd.Series([text], dtype="str"),
            "source_file": pd.Series([name], dtype="str"),
        }
    )


def _table_documents(
    name: str, frame: pd.DataFrame, config: IngestConfig, several: bool, warnings: list[str]
) -> pd.DataFrame:
    text_column, id_column, title_column = choose_columns(name, frame, config, warnings)
    prefix = f"{PurePosixPath(name).stem}:" if several else ""
    ids = pd.Series([f"{prefix}{row}" for row in range(1, len(frame) + 1)], dtype="str")
    if id_column:
        given = column_text(frame[id_column])
        ids = given.where(given.ne(""), ids)
    titles = pd.Series([None] * len(frame), dtype=object)
    if title_column:
        given = column_text(frame[title_column])
        titles = given.astype(object).where(given.ne(""), None)
    documents = pd.DataFrame({"doc_id": ids, "title": titles, "text": column_text(frame[text_column])})
    metadata = frame.drop(columns=list({text_column, id_column, title_column} - {None})).reset_index(drop=True)
    metadata = _parse_iso_dates(metadata.rename(columns=_renamed_reserved(metadata, warnings, name)))
    if several:
        metadata["source_file"] = name
    return pd.concat([documents, metadata], axis=1)


def _renamed_reserved(metadata: pd.DataFrame, warnings: list[str], name: str) -> dict[str, str]:
    renames = {column: f"{column}_original" for column in metadata.columns if column in _RESERVED_COLUMNS}
    warnings.extend(f"{name}: column '{old}' kept as '{new}'" for old, new in renames.items())
    return renames


def _parse_iso_dates(metadata: pd.DataFrame) -> pd.DataFrame:
    """Text columns holding only ISO dates (as CSV and JSON store them) become datetime columns."""
    for column in metadata.columns:
        strings = string_values(metadata[column])
        if len(strings) == 0 or len(strings) < metadata[column].notna().sum():
            continue
        if strings.head(100).str.fullmatch(_ISO_DATE).all() and strings.str.fullmatch(_ISO_DATE).all():
            try:
                metadata[column] = pd.to_datetime(metadata[column], format="ISO8601")
            except (ValueError, TypeError, OverflowError):
                continue  # e.g. mixed time zones: keep the text
    return metadata


def _check_lengths(name: str, documents: pd.DataFrame, config: IngestConfig) -> None:
    lengths = documents["text"].str.len()
    too_long = lengths > config.max_document_chars
    if too_long.any():
        first = too_long.idxmax()
        raise IngestError(
            f"{name}: document '{documents.at[first, 'doc_id']}' has {int(lengths[first]):,} characters; "
            f"the limit is {config.max_document_chars:,} (split it into smaller documents)"
        )


def unique_ids(ids: list[str]) -> tuple[list[str], dict[str, str]]:
    """Repeated ids get a suffix ("7", "7" -> "7", "7#2") that collides with no other id."""
    taken = set(ids)
    seen: set[str] = set()
    next_copy: dict[str, int] = {}
    unique, renamed = [], {}
    for doc_id in ids:
        new_id = doc_id
        if doc_id in seen:
            copy = next_copy.get(doc_id, 2)
            while f"{doc_id}#{copy}" in taken:
                copy += 1
            new_id = f"{doc_id}#{copy}"
            next_copy[doc_id] = copy + 1
            taken.add(new_id)
            renamed[new_id] = doc_id
        seen.add(new_id)
        unique.append(new_id)
    return unique, renamed
