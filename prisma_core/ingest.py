"""Read an analyst's files (tables, text files, PDFs, Word documents, zips of these) into one document table.

Pure: nothing is stored here. Every function returns a complete result or raises an IngestError that names the
file and the problem, so the caller never persists half an upload.
"""

import codecs
import io
import json
import re
import zipfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from xml.etree.ElementTree import ParseError

import docx
import openpyxl
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pypdf
from docx.opc.exceptions import PackageNotFoundError
from lxml.etree import XMLSyntaxError
from openpyxl.utils.exceptions import InvalidFileException

from prisma_core.errors import IngestError, SettingsError

SUPPORTED_EXTENSIONS: tuple[str, ...] = (
    ".csv", ".tsv", ".xlsx", ".json", ".jsonl", ".parquet", ".txt", ".md", ".pdf", ".docx", ".zip",
)  # fmt: skip
_TITLE_NAMES = ("title", "headline")
_RESERVED_COLUMNS = ("doc_id", "title", "text", "source_file")
_DELIMITERS = ",;\t|"
_SAMPLE_CHARS = 65_536  # how much of a decoded file the binary-content check looks at
_MAX_UNPRINTABLE_SHARE = 0.05  # real text has almost no control characters; binary data has ~25%
_CHUNK_BYTES = 2**20
_OS_CLUTTER = re.compile(r"(^|/)(__MACOSX/|\.[^/]*$)")  # macOS resource forks, .DS_Store and other hidden files
_UNSAFE_PATH = re.compile(r"^[/\\]|^[A-Za-z]:|(^|[/\\])\.\.([/\\]|$)")
_ISO_DATE = r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?"

Source = tuple[str, bytes]  # (file name, content): what a browser upload gives


@dataclass(frozen=True)
class IngestConfig:
    text_column: str | None = None
    """None: auto-detect the most text-like string column (longest mean length)."""
    id_column: str | None = None
    """None: ids from 1-based row numbers ("notes:3" when several files)."""
    title_column: str | None = None
    """None: a column named title/headline if present; text files: file name stem."""
    max_file_bytes: int = 200 * 2**20
    """Per file, and per file unpacked from a zip."""
    max_total_bytes: int = 500 * 2**20
    """All files together, counting zip contents as actually unpacked."""
    max_zip_members: int = 10_000
    """Files a zip may hold; a zip with more is refused."""
    max_document_chars: int = 2_000_000
    """A longer document is refused, naming it."""
    max_rows: int = 1_000_000
    """Per table file; a longer table is refused, reading no more than this many rows."""

    def __post_init__(self) -> None:
        limits = (
            self.max_file_bytes, self.max_total_bytes, self.max_zip_members, self.max_document_chars, self.max_rows,
        )  # fmt: skip
        if min(limits) <= 0:
            raise SettingsError("ingest limits must be positive numbers")


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


# -- public API -------------------------------------------------------------------------------------------------


def read_sources(sources: Sequence[Source], config: IngestConfig = IngestConfig()) -> IngestedDataset:
    warnings: list[str] = []
    files = _unpack(sources, config, warnings)
    several = len(files) > 1
    parts = [_documents_of(name, data, config, several, warnings) for name, data in files]
    documents = pd.concat(parts, ignore_index=True)
    ids, renamed_ids = _unique_ids(documents["doc_id"].tolist())
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
    files = [Path(path) for path in paths]
    for path in files:
        if not path.is_file():
            raise IngestError(f"{path}: file not found")
        _check_file_size(path.name, path.stat().st_size, config)
    _check_total_size(sum(path.stat().st_size for path in files), config)
    return read_sources([(path.name, path.read_bytes()) for path in files], config)


def preview_sources(sources: Sequence[Source], n_rows: int = 20) -> pd.DataFrame:
    """The first rows of the files as read, before any column is chosen: the columns a user can pick from.

    Only those rows are read (a table of millions of rows previews as fast as a small one)."""
    config = IngestConfig(max_rows=n_rows)
    warnings: list[str] = []
    frames = []
    for name, data in _unpack(sources, config, warnings):
        content = _read_file(name, data, config, warnings)
        frames.append(
            content.head(n_rows)
            if isinstance(content, pd.DataFrame)
            else _text_document(name, content).drop(columns="doc_id")
        )
    return pd.concat(frames, ignore_index=True).head(n_rows)


def guess_text_column(frame: pd.DataFrame) -> str:
    """The column with the longest mean text length (missing values count as empty) among those holding words."""
    scores = {}
    for column in frame.columns:
        strings = _string_values(frame[column])
        if len(strings) and strings.str.contains(r"[^\W\d_]", regex=True).any():
            scores[column] = strings.str.len().sum() / len(frame)
    if not scores:
        raise IngestError(f"no text-like column; the columns are: {_column_list(frame)}")
    return max(scores, key=scores.__getitem__)


# -- files and zips ---------------------------------------------------------------------------------------------


def _unpack(sources: Sequence[Source], config: IngestConfig, warnings: list[str]) -> list[Source]:
    """Checks names and sizes, and replaces each zip by its members (names are paths inside the zip)."""
    if not sources:
        raise IngestError("no files were given")
    for name, data in sources:
        _check_extension(name)
        _check_file_size(name, len(data), config)
        if not data:
            raise IngestError(f"{name}: the file is empty (0 bytes)")
    _check_total_size(sum(len(data) for _, data in sources), config)
    budget = config.max_total_bytes - sum(len(data) for name, data in sources if not _is_zip(name))
    files: list[Source] = []
    for name, data in sources:
        if _is_zip(name):
            members = _unzip(name, data, config, budget, warnings)
            budget -= sum(len(content) for _, content in members)
            files.extend(members)
        else:
            files.append((name, data))
    return files


def _unzip(name: str, data: bytes, config: IngestConfig, budget: int, warnings: list[str]) -> list[Source]:
    archive = _open_zip(name, data, "zip archive")
    with archive:
        infos = archive.infolist()
        if len(infos) > config.max_zip_members:
            raise IngestError(f"{name}: holds {len(infos):,} files; the limit is {config.max_zip_members:,}")
        unsafe = [info.filename for info in infos if _UNSAFE_PATH.search(info.filename)]
        if unsafe:
            raise IngestError(f"{name}: refused, it holds unsafe paths ({', '.join(unsafe[:5])})")
        wanted = [info for info in infos if not info.is_dir() and not _OS_CLUTTER.search(info.filename)]
        nested = [info.filename for info in wanted if _is_zip(info.filename)]
        if nested:
            raise IngestError(f"{name}: zips inside a zip are not supported ({', '.join(nested[:5])})")
        supported = [info for info in wanted if _extension(info.filename) in SUPPORTED_EXTENSIONS]
        if len(supported) < len(wanted):
            skipped = [info.filename for info in wanted if info not in supported]
            warnings.append(f"{name}: skipped unsupported files: {', '.join(skipped[:10])}")
        members = []
        for info in supported:
            content = _inflate(archive, info, min(budget, config.max_file_bytes), name)
            budget -= len(content)
            members.append((info.filename, content))
    if not members:
        raise IngestError(f"{name}: holds no supported files ({', '.join(SUPPORTED_EXTENSIONS)})")
    return members


def _open_zip(name: str, data: bytes, what: str) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError) as error:
        raise IngestError(f"{name}: is not a valid {what}") from error


def _inflate(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int, name: str) -> bytes:
    """Unpacks one member, counting the bytes actually produced: the sizes a zip header declares can lie."""
    return b"".join(_unpacked_chunks(archive, info, limit, name))


def _unpacked_chunks(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int, name: str) -> Iterator[bytes]:
    if info.flag_bits & 0x1:
        raise IngestError(f"{name}: '{info.filename}' is password-protected")
    size = 0
    try:
        with archive.open(info) as member:
            while chunk := member.read(_CHUNK_BYTES):
                size += len(chunk)
                if size > limit:
                    raise IngestError(
                        f"{name}: unpacks to more than {limit:,} bytes, the limit (refused: too large, or a zip bomb)"
                    )
                yield chunk
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, OSError) as error:
        raise IngestError(f"{name}: '{info.filename}' is damaged or uses unsupported compression") from error


def _check_unpacked_size(name: str, data: bytes, limit: int, what: str) -> None:
    """xlsx and docx files are zips too: refuse one that would unpack to more than the limit (one chunk in memory
    at a time)."""
    with _open_zip(name, data, what) as archive:
        for info in archive.infolist():
            limit -= sum(len(chunk) for chunk in _unpacked_chunks(archive, info, limit, name))


def _check_extension(name: str) -> None:
    if _extension(name) not in SUPPORTED_EXTENSIONS:
        raise IngestError(f"{name}: unsupported file type; supported: {', '.join(SUPPORTED_EXTENSIONS)}")


def _check_file_size(name: str, size: int, config: IngestConfig) -> None:
    if size > config.max_file_bytes:
        raise IngestError(f"{name}: {size:,} bytes is more than the {config.max_file_bytes:,}-byte limit per file")


def _check_total_size(total: int, config: IngestConfig) -> None:
    if total > config.max_total_bytes:
        raise IngestError(f"the files add up to {total:,} bytes, more than the {config.max_total_bytes:,}-byte limit")


def _extension(name: str) -> str:
    return PurePosixPath(name).suffix.lower()


def _is_zip(name: str) -> bool:
    return _extension(name) == ".zip"


# -- readers: bytes -> a raw table (tabular formats) or one text (text-like formats) -----------------------------


def _read_file(name: str, data: bytes, config: IngestConfig, warnings: list[str]) -> pd.DataFrame | str:
    content = _READERS[_extension(name)](name, data, config, warnings)
    if isinstance(content, pd.DataFrame):
        content.columns = [str(column) for column in content.columns]
    return content


def _read_delimited(name: str, data: bytes, config: IngestConfig, warnings: list[str]) -> pd.DataFrame:
    encoding = _text_encoding(name, data, "a text table", warnings)
    header = data[:_SAMPLE_CHARS].decode(encoding, errors="ignore")
    separator = "\t" if _extension(name) == ".tsv" else _sniff_delimiter(header)
    named = (config.text_column, config.id_column, config.title_column)
    as_text = {column: "str" for column in named if column}  # keeps ids like "007" and numeric texts verbatim
    try:
        return pd.read_csv(io.BytesIO(data), sep=separator, dtype=as_text, encoding=encoding, nrows=config.max_rows + 1)
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
    _check_unpacked_size(name, data, config.max_total_bytes, "Excel .xlsx workbook")
    try:
        with pd.ExcelFile(io.BytesIO(data), engine="openpyxl") as workbook:
            if len(workbook.sheet_names) > 1:
                sheets = len(workbook.sheet_names)
                warnings.append(f"{name}: read only the first sheet, '{workbook.sheet_names[0]}', of {sheets}")
            frame = pd.read_excel(workbook, sheet_name=0, nrows=config.max_rows + 1)
        empty = [str(column) for column in frame.columns if frame[column].isna().all()]
        formulas = _formula_columns(data, empty) if len(frame) and empty else []
    except (*_WORKBOOK_ERRORS, RecursionError) as error:
        raise IngestError(f"{name}: is not a valid Excel .xlsx workbook ({error})") from error
    if formulas:
        warnings.append(
            f"{name}: column(s) {', '.join(formulas)} hold formulas whose results were never saved, so they read "
            "as empty; open the file in Excel or LibreOffice and save it to store the results"
        )
    return frame


_WORKBOOK_ERRORS = (zipfile.BadZipFile, KeyError, ValueError, OSError, InvalidFileException, ParseError, XMLSyntaxError)
_FORMULA_SCAN_ROWS = 100


def _declared_sheet_rows(data: bytes) -> int | None:
    """Rows (header included) the first sheet says it holds, read from its <dimension> without reading rows."""
    workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True)
    try:
        return workbook.worksheets[0].max_row
    finally:
        workbook.close()


def _formula_columns(data: bytes, columns: list[str]) -> list[str]:
    """Which of these columns hold formulas in their first rows (read as formulas, not as saved results)."""
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
        content = json.loads(_decode(name, data, "JSON", warnings))
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
    for number, line in enumerate(_decode(name, data, "JSON lines", warnings).splitlines(), start=1):
        if len(records) > config.max_rows:
            break
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise IngestError(f"{name}: line {number} is not valid JSON ({error.msg})") from error
            except RecursionError:
                raise IngestError(f"{name}: line {number} is nested too deeply to read") from None
    return _records_frame(name, records, warnings)


def _records_frame(name: str, records: list[Any], warnings: list[str]) -> pd.DataFrame:
    """Records -> a table; nested objects become dotted columns, lists become JSON text.

    A dotted field and a nested one that flatten to the same name ("a.b" and {"a": {"b": ...}}) both keep their
    values: the later one becomes "a.b (2)", with a warning."""
    if records and all(isinstance(record, str) for record in records):
        return pd.DataFrame({"text": records})
    for number, record in enumerate(records, start=1):
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
    try:
        parquet = pq.ParquetFile(pa.BufferReader(data))
        wanted, groups = config.max_rows + 1, []
        for index in range(parquet.num_row_groups):
            if sum(parquet.metadata.row_group(group).num_rows for group in groups) >= wanted:
                break
            groups.append(index)
        return parquet.read_row_groups(groups).slice(0, wanted).to_pandas()
    except (pa.ArrowException, OSError) as error:
        raise IngestError(f"{name}: is not a valid Parquet file ({error})") from error


def _read_plain_text(name: str, data: bytes, config: IngestConfig, warnings: list[str]) -> str:
    return _decode(name, data, "text", warnings)


def _read_pdf(name: str, data: bytes, config: IngestConfig, warnings: list[str]) -> str:
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
    try:
        return reader.decrypt("") != pypdf.PasswordType.NOT_DECRYPTED
    except (pypdf.errors.PyPdfError, NotImplementedError):
        return False


def _read_docx(name: str, data: bytes, config: IngestConfig, warnings: list[str]) -> str:
    _check_unpacked_size(name, data, config.max_total_bytes, "Word .docx file")
    try:
        document = docx.Document(io.BytesIO(data))
    except (zipfile.BadZipFile, KeyError, ValueError, PackageNotFoundError, XMLSyntaxError) as error:
        raise IngestError(f"{name}: is not a valid Word .docx file ({error})") from error
    paragraphs = [paragraph.text for paragraph in document.paragraphs]
    cells = [cell.text for table in document.tables for row in table.rows for cell in row.cells]
    return "\n".join(paragraphs + cells)


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


def _decode(name: str, data: bytes, what: str, warnings: list[str]) -> str:
    return data.decode(_text_encoding(name, data, what, warnings))


def _text_encoding(name: str, data: bytes, what: str, warnings: list[str]) -> str:
    """UTF-8 (BOM or not), UTF-16 with a BOM, else cp1252/latin-1 with a warning; binary content is refused."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encodings = ["utf-16"]
    else:
        encodings = ["utf-8-sig", "cp1252", "latin-1"]
    for encoding in encodings:
        try:
            text = data.decode(encoding)
            break
        except UnicodeDecodeError:
            continue
    else:
        raise IngestError(f"{name}: starts with a UTF-16 mark but is not valid UTF-16 text")
    if encoding in ("cp1252", "latin-1"):
        warnings.append(f"{name}: not UTF-8, decoded as {encoding}")
    if not _looks_like_text(text[:_SAMPLE_CHARS]):
        raise IngestError(f"{name}: does not look like {what} (binary content); save it as UTF-8 text")
    return encoding


def _looks_like_text(sample: str) -> bool:
    unprintable = sum(1 for char in sample if not char.isprintable() and char not in "\t\n\r")
    return "\x00" not in sample and unprintable <= _MAX_UNPRINTABLE_SHARE * len(sample)


# -- raw content -> documents -----------------------------------------------------------------------------------


def _documents_of(name: str, data: bytes, config: IngestConfig, several: bool, warnings: list[str]) -> pd.DataFrame:
    if _extension(name) == ".xlsx":
        _check_declared_rows(name, data, config)
    content = _read_file(name, data, config, warnings)
    if isinstance(content, pd.DataFrame):
        _check_rows(name, len(content), config)
        documents = _table_documents(name, content, config, several, warnings)
    else:
        documents = _text_document(name, content)
    _check_lengths(name, documents, config)
    return documents


def _check_declared_rows(name: str, data: bytes, config: IngestConfig) -> None:
    """A sheet that declares more rows than the limit is refused before a single row is read."""
    _check_unpacked_size(name, data, config.max_total_bytes, "Excel .xlsx workbook")
    try:
        declared = _declared_sheet_rows(data)
    except (*_WORKBOOK_ERRORS, RecursionError) as error:
        raise IngestError(f"{name}: is not a valid Excel .xlsx workbook ({error})") from error
    if declared is not None:
        _check_rows(name, declared - 1, config)


def _check_rows(name: str, n_rows: int, config: IngestConfig) -> None:
    if n_rows > config.max_rows:
        raise IngestError(
            f"{name}: has more than {config.max_rows:,} rows, the limit per table; split it into smaller files"
        )


def _text_document(name: str, text: str) -> pd.DataFrame:
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
    text_column, id_column, title_column = _choose_columns(name, frame, config, warnings)
    prefix = f"{PurePosixPath(name).stem}:" if several else ""
    ids = pd.Series([f"{prefix}{row}" for row in range(1, len(frame) + 1)], dtype="str")
    if id_column:
        given = _column_text(frame[id_column])
        ids = given.where(given.ne(""), ids)
    titles = pd.Series([None] * len(frame), dtype=object)
    if title_column:
        given = _column_text(frame[title_column])
        titles = given.astype(object).where(given.ne(""), None)
    documents = pd.DataFrame({"doc_id": ids, "title": titles, "text": _column_text(frame[text_column])})
    metadata = frame.drop(columns=list({text_column, id_column, title_column} - {None})).reset_index(drop=True)
    metadata = _parse_iso_dates(metadata.rename(columns=_renamed_reserved(metadata, warnings, name)))
    if several:
        metadata["source_file"] = name
    return pd.concat([documents, metadata], axis=1)


def _choose_columns(
    name: str, frame: pd.DataFrame, config: IngestConfig, warnings: list[str]
) -> tuple[str, str | None, str | None]:
    """(text, id, title) columns: the configured ones, else the most text-like and a column named title/headline."""
    id_column = _named_column(name, frame, config.id_column)
    title_column = _named_column(name, frame, config.title_column)
    text_column = _named_column(name, frame, config.text_column)
    if text_column is None:
        candidates = frame.drop(columns=[column for column in (id_column, title_column) if column])
        try:
            text_column = guess_text_column(candidates)
        except IngestError as error:
            raise IngestError(f"{name}: {error}") from None
        warnings.append(f"{name}: text column auto-detected as '{text_column}'")
    if title_column is None:
        title_column = _title_by_name(frame, exclude={text_column, id_column})
    return text_column, id_column, title_column


def _named_column(name: str, frame: pd.DataFrame, column: str | None) -> str | None:
    if column is not None and column not in frame.columns:
        raise IngestError(f"{name}: no column named '{column}'; the columns are: {_column_list(frame)}")
    return column


def _title_by_name(frame: pd.DataFrame, exclude: set[str | None]) -> str | None:
    matches = [column for column in frame.columns if column.lower() in _TITLE_NAMES and column not in exclude]
    return matches[0] if matches else None


def _renamed_reserved(metadata: pd.DataFrame, warnings: list[str], name: str) -> dict[str, str]:
    renames = {column: f"{column}_original" for column in metadata.columns if column in _RESERVED_COLUMNS}
    warnings.extend(f"{name}: column '{old}' kept as '{new}'" for old, new in renames.items())
    return renames


def _string_values(column: pd.Series) -> pd.Series:
    """The non-missing string values of a column (object columns can mix strings with numbers)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        column = column.astype(object)
    if isinstance(column.dtype, pd.StringDtype):
        return column.dropna()
    if column.dtype != object:
        return column.iloc[:0].astype("str")
    values = column.dropna()
    return values[values.map(type).eq(str)].astype("str")


def _column_text(column: pd.Series) -> pd.Series:
    """A column as text, "" where missing (vectorised for string columns)."""
    if isinstance(column.dtype, pd.StringDtype):
        return column.fillna("").reset_index(drop=True)
    return pd.Series([_cell_text(value) for value in column], dtype="str")


def _cell_text(value: Any) -> str:
    """A cell as text: missing -> "", 7.0 -> "7", bytes decoded, anything else as str()."""
    if value is None or (pd.api.types.is_scalar(value) and pd.isna(value)):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _parse_iso_dates(metadata: pd.DataFrame) -> pd.DataFrame:
    """Text columns holding only ISO dates (as CSV and JSON store them) become datetime columns."""
    for column in metadata.columns:
        strings = _string_values(metadata[column])
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


def _unique_ids(ids: list[str]) -> tuple[list[str], dict[str, str]]:
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


def _column_list(frame: pd.DataFrame) -> str:
    return ", ".join(str(column) for column in frame.columns) or "(none)"
