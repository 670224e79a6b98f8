"""What an upload may be: the supported file types and the ingest settings (columns, limits)."""

from dataclasses import dataclass

from prisma_core.config_docs import CheckedConfig, setting
from prisma_core.ingest.dates import DateOrder

SUPPORTED_EXTENSIONS: tuple[str, ...] = (
    ".csv", ".tsv", ".xlsx", ".json", ".jsonl", ".parquet", ".txt", ".md", ".pdf", ".docx", ".zip",
)  # fmt: skip

Source = tuple[str, bytes]  # (file name, content): what a browser upload gives


MAX_ROWS = 1_000_000
"""The default row limit per table."""


@dataclass(frozen=True)
class IngestConfig(CheckedConfig):
    settings_name = "ingest"

    text_column: str | None = setting(
        None, doc="None: auto-detect the most text-like string column (longest mean length)."
    )
    id_column: str | None = setting(
        None, doc='None: 1-based row numbers ("notes:3" when several files); see guess_id_column.'
    )
    title_column: str | None = setting(
        None, doc="None: a column named title/headline if present; text files: file name stem."
    )
    max_file_bytes: int = setting(
        200 * 2**20,
        minimum=1,
        maximum=2**40,
        doc="Per file, and per file unpacked from a zip (not for Parquet, CSV, TSV and JSON lines files read "
        "from disk, which are read a batch at a time).",
    )
    max_total_bytes: int = setting(
        500 * 2**20,
        minimum=1,
        maximum=2**40,
        doc="All files together, counting zip contents as actually unpacked (files read a batch at a time not "
        "counted).",
    )
    max_zip_members: int = setting(
        10_000, minimum=1, maximum=10_000_000, doc="Files a zip may hold; a zip with more is refused."
    )
    max_document_chars: int = setting(
        2_000_000, minimum=1, maximum=1_000_000_000, doc="A longer document is refused, naming it."
    )
    max_rows: int = setting(
        MAX_ROWS,
        minimum=1,
        maximum=1_000_000_000,
        doc="Per table file; a longer table is refused, reading no more than this many rows.",
    )
    batch_rows: int = setting(
        10_000,
        minimum=1,
        maximum=1_000_000,
        doc="Rows read and stored at a time from a Parquet, CSV, TSV or JSON lines file on disk: memory holds "
        "about one batch of texts, whatever the file's size.",
    )
    date_order: DateOrder = setting(
        "auto",
        doc="How dates like 04/05/2007 are written, where every day of a column is 12 or less so its values "
        "cannot tell: day_first (4 May) or month_first (5 April); auto keeps such a column as text, with "
        "a warning. A column whose values show their order (a 25/04/2007) is read in that order whatever "
        "this says.",
    )
