"""Documents: a text file as one, the length limit, ids made unique (tables: tables.py)."""

from pathlib import PurePosixPath

import pandas as pd

from prisma_core.errors import IngestError
from prisma_core.ingest.config import IngestConfig


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


def check_lengths(name: str, documents: pd.DataFrame, config: IngestConfig) -> None:
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
