"""Readers: bytes -> a raw table (tabular formats) or one text (text-like formats)."""

from __future__ import annotations

import contextlib
import io
import json
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from xml.etree.ElementTree import ParseError

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from prisma_core.errors import IngestError
from prisma_core.ingest.archives import check_unpacked_size, extension, open_zip, unpacked_chunks
from prisma_core.ingest.config import MAX_ROWS, IngestConfig
from prisma_core.ingest.encodings import SAMPLE_CHARS, decode, file_encoding, text_encoding

if TYPE_CHECKING:
    import pypdf
# The Excel, PDF and Word libraries (0.35 s to import) are imported by their readers, on the first such file.

_DELIMITERS = ",;\t|"

Batch = tuple[pd.DataFrame, int]  # rows of a table file on disk, and the file's bytes read so far


def read_file(name: str, data: bytes, config: IngestConfig, warnings: list[str]) -> pd.DataFrame | str:
    content = _READERS[extension(name)](name, data, config, warnings)
    if isinstance(content, pd.DataFrame):
        content.columns = [str(column) for column in content.columns]
    return content


def _read_delimited(name: str, data: bytes, config: IngestConfig, warnings: list[str]) -> pd.DataFrame:
    encoding = text_encoding(name, data, "a text table", warnings)
    options = _delimited_options(name, data[:SAMPLE_CHARS], encoding, config)
    with _table_errors(name):
        return pd.read_csv(io.BytesIO(data), nrows=config.max_rows + 1, **options)


def _delimited_batches(name: str, path: Path, config: IngestConfig, warnings: list[str]) -> Iterator[Batch]:
    encoding = file_encoding(name, path, "a text table", warnings)
    with path.open("rb") as handle:
        options = _delimited_options(name, handle.read(SAMPLE_CHARS), encoding, config)
        handle.seek(0)
        with _table_errors(name), pd.read_csv(handle, chunksize=config.batch_rows, **options) as chunks:
            for chunk in chunks:
                yield chunk, handle.tell()


def _delimited_options(name: str, head: bytes, encoding: str, config: IngestConfig) -> dict[str, Any]:
    """pandas.read_csv's separator, encoding and column types; the named columns are read as text (keeps ids like
    "007" and numeric texts verbatim)."""
    header = head.decode(encoding, errors="ignore")
    separator = "\t" if extension(name) == ".tsv" else _sniff_delimiter(header)
    named = (config.text_column, config.id_column, config.title_column)
    return {"sep": separator, "dtype": {column: "str" for column in named if column}, "encoding": encoding}


@contextlib.contextmanager
def _table_errors(name: str) -> Iterator[None]:
    try:
        yield
    except pd.errors.EmptyDataError as error:
        raise IngestError(f"{name}: the table has no columns") from error
    except (pd.errors.ParserError, ValueError) as error:
        raise IngestError(f"{name}: could not be read as a table ({error})") from error


def _sniff_delimiter(text: str) -> str:
    """The candidate delimiter most frequent in the header line (headers rarely contain delimiters themselves)."""
    header = text[: text.find("\n")] if "\n" in text else text
    counts = {delimiter: header.count(delimiter) for delimiter in _DELIMITERS}
    best = max(counts, key=counts.__getitem__)
    return best if counts[best] else ","


def _read_excel(name: str, data: bytes, config: IngestConfig, warnings: list[str]) -> pd.DataFrame:
    """The first sheet, streamed: no more than config.max_rows + 1 rows are read."""
    _check_workbook_size(name, data, config)
    try:
        with pd.ExcelFile(io.BytesIO(data), engine="openpyxl") as workbook:
            if len(workbook.sheet_names) > 1:
                sheets = len(workbook.sheet_names)
                warnings.append(f"{name}: read only the first sheet, '{workbook.sheet_names[0]}', of {sheets}")
            frame = pd.read_excel(workbook, sheet_name=0, nrows=config.max_rows + 1)
        empty = [str(column) for column in frame.columns if frame[column].isna().all()]
        formulas = _formula_columns(data, empty) if len(frame) and empty else []
    except _workbook_errors() as error:
        raise IngestError(f"{name}: is not a valid Excel .xlsx workbook ({error})") from error
    if formulas:
        warnings.append(
            f"{name}: column(s) {', '.join(formulas)} hold formulas whose results were never saved, so they read "
            "as empty; open the file in Excel or LibreOffice and save it to store the results"
        )
    return frame


SHARED_STRINGS_PER_ROW = 4
"""A workbook may hold at most this many distinct texts (its shared strings) per row of the row limit (never fewer
than for the default limit: a preview reading 20 rows checks as the ingest will): every one is held in memory before
the first row is read (about 225 bytes each: 10 million took 2.25 GB and 326 s)."""
_SHARED_STRINGS = "xl/sharedStrings.xml"


def _check_workbook_size(name: str, data: bytes, config: IngestConfig) -> None:
    """Refuses a workbook that unpacks to more than the size limit, or holds more shared strings than
    SHARED_STRINGS_PER_ROW per row of the row limit, before it is parsed (one chunk in memory at a time)."""
    check_unpacked_size(name, data, config.max_total_bytes, "Excel .xlsx workbook")
    max_rows = max(config.max_rows, MAX_ROWS)
    limit = SHARED_STRINGS_PER_ROW * max_rows
    with open_zip(name, data, "Excel .xlsx workbook") as archive:
        if _SHARED_STRINGS not in archive.namelist():
            return
        tail, count = b"", 0
        for chunk in unpacked_chunks(archive, archive.getinfo(_SHARED_STRINGS), config.max_total_bytes, name):
            text = tail + chunk
            count += text.count(b"<si>") + text.count(b"<si ")
            tail = text[-3:]  # an element cut between two chunks is counted in the next one
            if count > limit:
                raise IngestError(
                    f"{name}: holds more than {limit:,} distinct texts, more than {SHARED_STRINGS_PER_ROW} per row "
                    f"of the {max_rows:,}-row limit; split the workbook or save its sheet as CSV"
                )


def _workbook_errors() -> tuple[type[BaseException], ...]:
    from lxml.etree import XMLSyntaxError
    from openpyxl.utils.exceptions import InvalidFileException

    return (
        zipfile.BadZipFile,
        KeyError,
        ValueError,
        OSError,
        InvalidFileException,
        ParseError,
        XMLSyntaxError,
        RecursionError,
    )


_FORMULA_SCAN_ROWS = 100


def _declared_sheet_rows(data: bytes) -> int | None:
    """Rows (header included) the first sheet says it holds, read from its <dimension> without reading rows."""
    import openpyxl

    workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True)
    try:
        return workbook.worksheets[0].max_row
    finally:
        workbook.close()


def _formula_columns(data: bytes, columns: list[str]) -> list[str]:
    """Which of these columns hold formulas in their first rows (read as formulas, not as saved results)."""
    import openpyxl

    workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=False)
    try:
        rows = workbook.worksheets[0].iter_rows(max_row=_FORMULA_SCAN_ROWS + 1, values_only=True)
        header = [str(value) for value in next(rows, ())]
        cells = (cell for row in rows for cell in zip(header, row, strict=False))  # short rows end early
        found = {column for column, value in cells if isinstance(value, str) and value[:1] == "="}
    finally:
        workbook.close()
    return [column for column in columns if column in found]


def _read_json(name: str, data: bytes, config: IngestConfig, warnings: list[str]) -> pd.DataFrame:
    try:
        content = json.loads(decode(name, data, "JSON", warnings))
    except json.JSONDecodeError as error:
        if error.msg == "Extra data":  # one record per line, saved as .json
            return _read_jsonl(name, data, config, warnings)
        raise IngestError(f"{name}: is not valid JSON ({error})") from error
    except RecursionError:
        raise IngestError(f"{name}: is nested too deeply to read as records") from None
    if isinstance(content, dict):
        lists = [value for value in content.values() if isinstance(value, list)]
        content = lists[0] if len(lists) == 1 else content
    if not isinstance(content, list):
        raise IngestError(f"{name}: expected a list of records, or an object holding one list of records")
    return _records_frame(name, content, warnings)


def _read_jsonl(name: str, data: bytes, config: IngestConfig, warnings: list[str]) -> pd.DataFrame:
    records = []
    for number, line in enumerate(decode(name, data, "JSON lines", warnings).splitlines(), start=1):
        if len(records) > config.max_rows:
            break
        if line.strip():
            records.append(_json_line(name, number, line))
    return _records_frame(name, records, warnings)


def _jsonl_batches(name: str, path: Path, config: IngestConfig, warnings: list[str]) -> Iterator[Batch]:
    """config.batch_rows records at a time (record numbers in errors count from the file's start)."""
    encoding = file_encoding(name, path, "JSON lines", warnings)
    with path.open(encoding=encoding) as handle:
        records: list[Any] = []
        first = 1
        for number, line in enumerate(handle, start=1):
            if line.strip():
                records.append(_json_line(name, number, line))
            if len(records) == config.batch_rows:
                yield _records_frame(name, records, warnings, first), handle.buffer.tell()
                first, records = first + len(records), []
        if records or first == 1:
            yield _records_frame(name, records, warnings, first), handle.buffer.tell()


def _json_line(name: str, number: int, line: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as error:
        raise IngestError(f"{name}: line {number} is not valid JSON ({error.msg})") from error
    except RecursionError:
        raise IngestError(f"{name}: line {number} is nested too deeply to read") from None


def _records_frame(name: str, records: list[Any], warnings: list[str], first: int = 1) -> pd.DataFrame:
    """Records (numbered from `first` in errors) -> a table; nested objects become dotted columns, lists JSON text.

    A dotted field and a nested one that flatten to the same name ("a.b" and {"a": {"b": ...}}) both keep their
    values: the later one becomes "a.b (2)", with a warning."""
    if records and all(isinstance(record, str) for record in records):
        return pd.DataFrame({"text": records})
    for number, record in enumerate(records, start=first):
        if not isinstance(record, dict):
            raise IngestError(f"{name}: record {number} is not an object with named fields")
    collisions: set[str] = set()
    try:
        frame = pd.DataFrame([_flattened(record, collisions) for record in records])
    except RecursionError:
        raise IngestError(f"{name}: is nested too deeply to read as records") from None
    if collisions:
        warnings.append(
            f"{name}: field(s) {', '.join(sorted(collisions))} appear both as a dotted name and as a nested object; "
            "the second of each is kept as '<name> (2)'"
        )
    for column in frame.columns:
        if pd.api.types.is_object_dtype(frame[column]):
            frame[column] = frame[column].map(_json_if_list)
    return frame


def _flattened(record: dict[str, Any], collisions: set[str], prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}; a name met twice keeps both values, the second as "<name> (2)"."""
    flat: dict[str, Any] = {}
    for key, value in record.items():
        column = f"{prefix}{key}"
        inner = _flattened(value, collisions, f"{column}.") if isinstance(value, dict) and value else {column: value}
        for name, item in inner.items():
            if name in flat:
                collisions.add(name)
                name = f"{name} (2)"
            flat[name] = item
    return flat


def _json_if_list(value: Any) -> Any:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, list) else value


def _read_parquet(name: str, data: bytes, config: IngestConfig, warnings: list[str]) -> pd.DataFrame:
    """The first config.max_rows + 1 rows: only the row groups holding them are read."""
    with _parquet_errors(name):
        parquet = pq.ParquetFile(pa.BufferReader(data))
        wanted, groups = config.max_rows + 1, []
        for index in range(parquet.num_row_groups):
            if sum(parquet.metadata.row_group(group).num_rows for group in groups) >= wanted:
                break
            groups.append(index)
        return parquet.read_row_groups(groups).slice(0, wanted).to_pandas()


def _parquet_batches(name: str, path: Path, config: IngestConfig, warnings: list[str]) -> Iterator[Batch]:
    """config.batch_rows rows at a time; the bytes read are estimated from the rows read."""
    size = path.stat().st_size
    with _parquet_errors(name), pq.ParquetFile(path, pre_buffer=False) as parquet:  # True: keeps every batch read
        total, done = parquet.metadata.num_rows, 0
        for batch in parquet.iter_batches(batch_size=config.batch_rows):
            done += batch.num_rows
            yield batch.to_pandas(), size * done // total
        if not total:
            yield parquet.schema_arrow.empty_table().to_pandas(), size


@contextlib.contextmanager
def _parquet_errors(name: str) -> Iterator[None]:
    try:
        yield
    except (pa.ArrowException, OSError) as error:
        raise IngestError(f"{name}: is not a valid Parquet file ({error})") from error


def _read_plain_text(name: str, data: bytes, config: IngestConfig, warnings: list[str]) -> str:
    return decode(name, data, "text", warnings)


def _read_pdf(name: str, data: bytes, config: IngestConfig, warnings: list[str]) -> str:
    import pypdf

    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        locked = reader.is_encrypted and not _unlock(reader)
        text = "" if locked else "\n\n".join(page.extract_text() or "" for page in reader.pages)
    except Exception as error:  # pypdf raises many exception types on malformed files
        raise IngestError(f"{name}: is not a readable PDF ({error})") from error
    if locked:
        raise IngestError(f"{name}: the PDF is password-protected (encrypted); remove the password and upload again")
    if not text.strip():
        warnings.append(f"{name}: no extractable text (a scanned PDF needs OCR first)")
    return text


def _unlock(reader: pypdf.PdfReader) -> bool:
    """Many PDFs are encrypted with an empty user password: those open without asking."""
    import pypdf

    try:
        return reader.decrypt("") != pypdf.PasswordType.NOT_DECRYPTED
    except (pypdf.errors.PyPdfError, NotImplementedError):
        return False


def _read_docx(name: str, data: bytes, config: IngestConfig, warnings: list[str]) -> str:
    check_unpacked_size(name, data, config.max_total_bytes, "Word .docx file")
    import docx
    from docx.opc.exceptions import PackageNotFoundError
    from lxml.etree import XMLSyntaxError

    try:
        document = docx.Document(io.BytesIO(data))
    except (zipfile.BadZipFile, KeyError, ValueError, PackageNotFoundError, XMLSyntaxError) as error:
        raise IngestError(f"{name}: is not a valid Word .docx file ({error})") from error
    paragraphs = [paragraph.text for paragraph in document.paragraphs]
    cells = [cell.text for table in document.tables for row in table.rows for cell in row.cells]
    return "\n".join(paragraphs + cells)


_BATCH_READERS: dict[str, Callable[[str, Path, IngestConfig, list[str]], Iterator[Batch]]] = {
    ".csv": _delimited_batches,
    ".tsv": _delimited_batches,
    ".jsonl": _jsonl_batches,
    ".parquet": _parquet_batches,
}
STREAMED_EXTENSIONS = tuple(_BATCH_READERS)
"""Formats read from disk a batch at a time; the others are read whole."""


def table_batches(path: Path, config: IngestConfig, warnings: list[str]) -> Iterator[Batch]:
    """A table file on disk as raw tables of config.batch_rows rows, each with the file's bytes read so far."""
    for frame, bytes_read in _BATCH_READERS[extension(path.name)](path.name, path, config, warnings):
        frame.columns = [str(column) for column in frame.columns]
        yield frame, bytes_read


_READERS: dict[str, Callable[[str, bytes, IngestConfig, list[str]], pd.DataFrame | str]] = {
    ".csv": _read_delimited,
    ".tsv": _read_delimited,
    ".xlsx": _read_excel,
    ".json": _read_json,
    ".jsonl": _read_jsonl,
    ".parquet": _read_parquet,
    ".txt": _read_plain_text,
    ".md": _read_plain_text,
    ".pdf": _read_pdf,
    ".docx": _read_docx,
}


def check_declared_rows(name: str, data: bytes, config: IngestConfig) -> None:
    """A sheet that declares more rows than the limit is refused before a single row is read."""
    _check_workbook_size(name, data, config)
    try:
        declared = _declared_sheet_rows(data)
    except _workbook_errors() as error:
        raise IngestError(f"{name}: is not a valid Excel .xlsx workbook ({error})") from error
    if declared is not None:
        check_rows(name, declared - 1, config)


def check_rows(name: str, n_rows: int, config: IngestConfig) -> None:
    if n_rows > config.max_rows:
        raise IngestError(
            f"{name}: has more than {config.max_rows:,} rows, the limit per table; split it into smaller files"
        )
