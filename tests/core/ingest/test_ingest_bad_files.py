"""Files the readers refuse with a message naming the file and the problem (empty, damaged, binary, locked,
unsafe or too large), and files in other encodings read with a warning.
"""

import io
import random
import zipfile
from pathlib import Path

import pandas as pd
import pypdf
import pytest
from document_files import pdf_of_text, zip_of
from ingest_helpers import BY_COLUMN, csv_source, raises

from prisma_core.errors import IngestError
from prisma_core.ingest import IngestConfig, read_paths, read_sources


def test_empty_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.write_bytes(b"")
    with raises("empty.csv: the file is empty (0 bytes)"):
        read_paths([path])


def test_missing_named_column_lists_existing_ones(news: pd.DataFrame) -> None:
    with raises("table.csv: no column named 'body'; the columns are: id, title, text, label"):
        read_sources([csv_source(news)], IngestConfig(text_column="body"))
    with raises("no column named 'key'"):
        read_sources([csv_source(news)], IngestConfig(id_column="key"))


def test_numeric_only_table_has_no_text_column() -> None:
    frame = pd.DataFrame({"year": [2001, 2002], "value": [1.5, 2.5]})
    with raises("table.csv: no text-like column; the columns are: year, value"):
        read_sources([csv_source(frame)])


@pytest.mark.parametrize(
    "garbage",
    [random.Random(0).randbytes(5000), bytes(range(1, 32)) * 100, b"\x89PNG\r\n\x1a\n" + bytes(200)],
    ids=["random", "control-characters", "png"],
)
def test_binary_garbage_named_csv(garbage: bytes) -> None:
    with raises("data.csv: does not look like a text table"):
        read_sources([("data.csv", garbage)])


def test_latin1_csv_is_decoded_with_a_warning() -> None:
    content = "id,text\n1,Café crème à Zürich: £5\n2,naïve façade\n".encode("latin-1")
    dataset = read_sources([("notes.csv", content)], BY_COLUMN)
    assert dataset.documents["text"].tolist() == ["Café crème à Zürich: £5", "naïve façade"]
    assert "notes.csv: not UTF-8, decoded as cp1252" in dataset.report.warnings


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8-sig"])
def test_unicode_csv_with_byte_order_mark(encoding: str) -> None:
    content = "id,text\n1,Ελληνικά and 日本語\n2,emoji 🎉 ok\n".encode(encoding)
    dataset = read_sources([("notes.csv", content)], BY_COLUMN)
    assert dataset.documents["text"].tolist() == ["Ελληνικά and 日本語", "emoji 🎉 ok"]
    assert dataset.documents["doc_id"].tolist() == ["1", "2"]
    assert dataset.report.warnings == []


def test_zero_byte_pdf() -> None:
    with raises("scan.pdf: the file is empty (0 bytes)"):
        read_sources([("scan.pdf", b"")])


def test_encrypted_pdf(news: pd.DataFrame) -> None:
    writer = pypdf.PdfWriter(clone_from=io.BytesIO(pdf_of_text(news["text"].iloc[0])))
    writer.encrypt("secret", algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    with raises("locked.pdf: the PDF is password-protected"):
        read_sources([("locked.pdf", buffer.getvalue())])


def test_pdf_without_text_is_an_empty_document() -> None:
    writer = pypdf.PdfWriter()
    writer.add_blank_page(595, 842)
    buffer = io.BytesIO()
    writer.write(buffer)
    dataset = read_sources([("scan.pdf", buffer.getvalue()), ("note.txt", b"some words")])
    assert dataset.documents["doc_id"].tolist() == ["note.txt"]
    assert dataset.report.empty_ids == ["scan.pdf"]
    assert "scan.pdf: no extractable text (a scanned PDF needs OCR first)" in dataset.report.warnings


def test_pdf_that_is_not_a_pdf() -> None:
    with raises("fake.pdf: is not a readable PDF"):
        read_sources([("fake.pdf", b"just some text pretending")])


def test_docx_that_is_a_zip_of_something_else() -> None:
    with raises("letter.docx: is not a valid Word .docx file"):
        read_sources([("letter.docx", zip_of({"readme.txt": b"not a word document"}))])
    with raises("letter.docx: is not a valid Word .docx file"):
        read_sources([("letter.docx", b"plain bytes")])


@pytest.mark.parametrize("member", ["../evil.txt", "docs/../../evil.txt", "/etc/evil.txt", "C:/evil.txt", "..\\x.txt"])
def test_zip_with_unsafe_path_is_refused_whole(member: str) -> None:
    archive = zip_of({"fine.txt": b"harmless", member: b"payload"})
    with raises("upload.zip: refused, it holds unsafe paths"):
        read_sources([("upload.zip", archive)])


def test_nested_zip_is_refused() -> None:
    inner = zip_of({"a.txt": b"inner text"})
    with raises("outer.zip: zips inside a zip are not supported (inner.zip)"):
        read_sources([("outer.zip", zip_of({"a.txt": b"outer text", "inner.zip": inner}))])


def test_zip_bomb_is_refused_while_unpacking() -> None:
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive,
        archive.open("zeros.txt", "w", force_zip64=True) as member,
    ):
        for _ in range(200):
            member.write(bytes(2**20))
    assert len(buffer.getvalue()) < 1_000_000  # 200 MB of zeros packed into a few hundred KB
    config = IngestConfig(max_total_bytes=20 * 2**20)
    with pytest.raises(
        IngestError,
        match=r"bomb\.zip: unpacks to more than 20,971,520 bytes, the limit \(refused: too large, or a zip bomb\)",
    ):
        read_sources([("bomb.zip", buffer.getvalue())], config)


def test_zip_budget_counts_all_members_together() -> None:
    members = {f"part{number}.txt": b"a" * 1_500_000 for number in range(5)}  # 7.5 MB unpacked in total
    with raises("zip bomb"):
        read_sources([("parts.zip", zip_of(members))], IngestConfig(max_total_bytes=5_000_000))
    assert read_sources([("parts.zip", zip_of(members))]).report.n_documents == 5


def test_zip_member_count_is_bounded() -> None:
    archive = zip_of({f"{number}.txt": b"text" for number in range(5)})
    with raises("holds 5 files; the limit is 3"):
        read_sources([("many.zip", archive)], IngestConfig(max_zip_members=3))


def test_file_size_limit_is_checked_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    path.write_bytes(b"word " * 1000)
    with raises("big.txt: 5,000 bytes is more than the 4,000-byte limit per file"):
        read_paths([path], IngestConfig(max_file_bytes=4000))
    with raises("the files add up to 10,000 bytes"):
        read_paths([path, path], IngestConfig(max_total_bytes=8000))
    with raises("file not found"):
        read_paths([tmp_path / "missing.csv"])


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("old.doc", b"\xd0\xcf\x11\xe0", "old.doc: unsupported file type"),
        ("book.xlsx", b"not a workbook", "book.xlsx: is not a valid Excel .xlsx workbook"),
        ("data.parquet", b"PAR1 but not really", "data.parquet: is not a valid Parquet file"),
        ("data.json", b'{"text": ', "data.json: is not valid JSON"),
        ("data.json", b'{"a": [1], "b": [2]}', "data.json: expected a list of records"),
        ("data.jsonl", b'{"text": "ok"}\n{"text": \n', "data.jsonl: line 2 is not valid JSON"),
        ("data.json", b'[{"text": "ok"}, 5]', "data.json: record 2 is not an object"),
        ("broken.csv", b'id,text\n1,"unterminated\n', "broken.csv: could not be read as a table"),
    ],
)
def test_unsupported_and_malformed_files(name: str, content: bytes, message: str) -> None:
    with raises(message):
        read_sources([(name, content)])


def test_binary_garbage_named_txt() -> None:
    with raises("photo.txt: does not look like text (binary content)"):
        read_sources([("photo.txt", random.Random(1).randbytes(3000))])
