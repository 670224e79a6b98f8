"""The door to what the app and the command line read of documents before and around ingesting them: the files
accepted, a preview of their columns, the columns guessed, dates read, and the tokens the embedding model would cut
the texts into (`load_embedder(config).windows(texts)`)."""

from prisma_core.embed import load_embedder
from prisma_core.ingest import (
    SUPPORTED_EXTENSIONS,
    IngestReport,
    Source,
    guess_id_column,
    guess_text_column,
    guess_title_column,
    preview_paths,
    preview_sources,
    text_column_problem,
)
from prisma_core.ingest.columns import CHECKED_ROWS
from prisma_core.ingest.dates import DateOrder, ambiguous_date_columns, to_dates

__all__ = [
    "CHECKED_ROWS",
    "SUPPORTED_EXTENSIONS",
    "DateOrder",
    "IngestReport",
    "Source",
    "ambiguous_date_columns",
    "guess_id_column",
    "guess_text_column",
    "guess_title_column",
    "load_embedder",
    "preview_paths",
    "preview_sources",
    "text_column_problem",
    "to_dates",
]
