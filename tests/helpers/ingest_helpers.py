"""Shared by the reader tests (tests/core/ingest/): tables saved as an analyst's tools would, and the checks of
their refusals."""

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from prisma_core.errors import IngestError
from prisma_core.ingest import IngestConfig

BY_COLUMN = IngestConfig(text_column="text", id_column="id")


def raises(message: str) -> pytest.RaisesExc:
    return pytest.raises(IngestError, match=re.escape(message))


def squash(text: str) -> str:
    return " ".join(text.split())


def csv_source(frame: pd.DataFrame, name: str = "table.csv") -> tuple[str, bytes]:
    return name, frame.to_csv(index=False).encode()


def write_table(frame: pd.DataFrame, path: Path) -> None:
    """Saves a table as the analyst's tools would, in the format its name says."""
    match path.name:
        case "news.csv":
            frame.to_csv(path, index=False)
        case "news.tsv":
            frame.to_csv(path, index=False, sep="\t")
        case "news.xlsx":
            frame.to_excel(path, index=False)
        case "news.json":
            frame.to_json(path, orient="records")
        case "object.json":
            records = json.loads(frame.to_json(orient="records"))
            path.write_text(json.dumps({"source": "bbc", "articles": records}))
        case "news.jsonl":
            frame.to_json(path, orient="records", lines=True)
        case "news.parquet":
            frame.to_parquet(path)


TABLE_FILES = ["news.csv", "news.tsv", "news.xlsx", "news.json", "object.json", "news.jsonl", "news.parquet"]
