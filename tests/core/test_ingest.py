import io
import json
import random
import re
import time
import zipfile
from pathlib import Path

import docx
import numpy as np
import pandas as pd
import pypdf
import pytest
from document_files import pdf_of_text, zip_of

from prisma_core.errors import IngestError
from prisma_core.ingest import (
    SUPPORTED_EXTENSIONS,
    IngestConfig,
    guess_text_column,
    guess_title_column,
    preview_sources,
    read_paths,
    read_sources,
    text_column_problem,
)
from prisma_core.store.datasets import text_hash

BY_COLUMN = IngestConfig(text_column="text", id_column="id")


@pytest.fixture(scope="module")
def news(bbc: pd.DataFrame) -> pd.DataFrame:
    """50 BBC articles spread over all five labels."""
    return bbc.iloc[::44].head(50).reset_index(drop=True)


def raises(message: str) -> pytest.RaisesExc:
    return pytest.raises(IngestError, match=re.escape(message))


def squash(text: str) -> str:
    return " ".join(text.split())


def docx_of_text(text: str) -> bytes:
    document = docx.Document()
    for paragraph in text.split("\n"):
        document.add_paragraph(paragraph)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


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


# -- every format -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("file_name", TABLE_FILES)
def test_tabular_formats_round_trip(tmp_path: Path, news: pd.DataFrame, file_name: str) -> None:
    path = tmp_path / file_name
    write_table(news, path)
    dataset = read_paths([path], BY_COLUMN)
    docs = dataset.documents
    assert list(docs.columns) == ["doc_id", "title", "text", "text_hash", "label"]
    assert docs["doc_id"].tolist() == news["id"].tolist()
    assert docs["text"].tolist() == news["text"].tolist()
    assert docs["title"].tolist() == news["title"].tolist()  # a column named "title" is picked up
    assert docs["label"].tolist() == news["label"].tolist()
    assert dataset.report.n_documents == 50
    assert dataset.report.files == [file_name]
    assert dataset.report.empty_ids == dataset.report.duplicate_text_ids == []
    assert dataset.report.renamed_ids == {}


def test_auto_detection_picks_longest_text_and_numbers_rows(tmp_path: Path, news: pd.DataFrame) -> None:
    path = tmp_path / "news.csv"
    news.to_csv(path, index=False)
    dataset = read_paths([path])
    docs = dataset.documents
    assert docs["text"].tolist() == news["text"].tolist()
    assert docs["title"].tolist() == news["title"].tolist()
    assert docs["doc_id"].tolist() == [str(row) for row in range(1, 51)]
    assert docs["id"].tolist() == news["id"].tolist()  # unused columns stay as metadata
    assert "news.csv: text column auto-detected as 'text'" in dataset.report.warnings


def test_metadata_types_are_kept(tmp_path: Path, mtsamples: pd.DataFrame) -> None:
    frame = mtsamples.head(30).copy()
    frame["visit"] = pd.date_range("2024-01-01", periods=30, freq="D")
    frame["visit"] = frame["visit"].dt.strftime("%Y-%m-%d")  # CSV stores dates as ISO text
    frame["score"] = np.linspace(0.5, 3.0, 30)
    path = tmp_path / "notes.csv"
    frame.to_csv(path, index=False)
    docs = read_paths([path], IngestConfig(text_column="text", id_column="id")).documents
    assert docs["n_words"].dtype == np.int64
    assert docs["n_words"].tolist() == frame["n_words"].tolist()
    assert docs["score"].dtype == np.float64
    assert pd.api.types.is_datetime64_any_dtype(docs["visit"])
    assert docs["visit"].iloc[2] == pd.Timestamp("2024-01-03")
    assert docs["specialties"].tolist() == frame["specialties"].tolist()

    excel = tmp_path / "notes.xlsx"
    frame.assign(visit=pd.to_datetime(frame["visit"])).to_excel(excel, index=False)
    from_excel = read_paths([excel], IngestConfig(text_column="text", id_column="id")).documents
    assert pd.api.types.is_datetime64_any_dtype(from_excel["visit"])
    assert from_excel["n_words"].tolist() == frame["n_words"].tolist()


def test_text_files_are_one_document_each(tmp_path: Path, news: pd.DataFrame) -> None:
    paths = []
    for row, extension in zip(news.head(4).itertuples(), [".txt", ".md", ".txt", ".md"], strict=True):
        paths.append(tmp_path / f"{row.id}{extension}")
        paths[-1].write_text(row.text, encoding="utf-8")
    dataset = read_paths(paths)
    docs = dataset.documents
    assert docs["doc_id"].tolist() == [path.name for path in paths]
    assert docs["title"].tolist() == news["id"].head(4).tolist()  # the file name stem
    assert docs["text"].tolist() == news["text"].head(4).tolist()
    assert docs["source_file"].tolist() == [path.name for path in paths]
    assert dataset.report.files == [path.name for path in paths]


def test_pdf_text_is_extracted_across_pages(news: pd.DataFrame) -> None:
    article = news["text"].iloc[1]
    content = pdf_of_text(article, lines_per_page=10)
    assert len(pypdf.PdfReader(io.BytesIO(content)).pages) > 1
    dataset = read_sources([("report.pdf", content)])
    document = dataset.documents.iloc[0]
    assert (document["doc_id"], document["title"], document["source_file"]) == ("report.pdf", "report", "report.pdf")
    assert squash(document["text"]) == squash(article)


def test_docx_paragraphs_and_tables_are_read(news: pd.DataFrame) -> None:
    article = news["text"].iloc[2]
    word = docx.Document()
    for paragraph in article.split("\n"):
        word.add_paragraph(paragraph)
    table = word.add_table(rows=1, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Region", "Revenue up 4%"
    buffer = io.BytesIO()
    word.save(buffer)
    document = read_sources([("memo.docx", buffer.getvalue())]).documents.iloc[0]
    assert document["text"] == article + "\nRegion\nRevenue up 4%"
    assert (document["doc_id"], document["title"]) == ("memo.docx", "memo")


def test_zip_of_several_formats(news: pd.DataFrame) -> None:
    texts = news["text"].tolist()
    archive = zip_of(
        {
            "bundle/table.csv": news.head(10).to_csv(index=False).encode(),
            "bundle/notes/a.txt": texts[10].encode(),
            "bundle/b.md": texts[11].encode(),
            "bundle/c.pdf": pdf_of_text(texts[12]),
            "bundle/d.docx": docx_of_text(texts[13]),
            "bundle/picture.png": b"\x89PNG\r\n\x1a\n",
            "__MACOSX/bundle/._a.txt": b"\x00\x05\x16\x07",
            "bundle/.DS_Store": b"\x00\x00\x00\x01Bud1",
        }
    )
    dataset = read_sources([("upload.zip", archive)], IngestConfig(text_column="text"))
    docs = dataset.documents
    assert dataset.report.files == ["upload.zip"]
    assert dataset.report.n_documents == 14
    assert docs["doc_id"].tolist()[:3] == ["table:1", "table:2", "table:3"]  # generated ids carry the file stem
    assert docs["doc_id"].tolist()[10:] == ["bundle/notes/a.txt", "bundle/b.md", "bundle/c.pdf", "bundle/d.docx"]
    assert docs["title"].tolist()[10:] == ["a", "b", "c", "d"]
    assert docs["source_file"].tolist() == ["bundle/table.csv"] * 10 + docs["doc_id"].tolist()[10:]
    assert docs["text"].tolist()[:12] == texts[:12]
    assert squash(docs["text"].iloc[12]) == squash(texts[12])
    assert docs["text"].iloc[13] == texts[13]
    assert docs["label"].tolist()[:10] == news["label"].head(10).tolist()
    assert docs["label"].iloc[10:].isna().all()  # metadata columns are unioned
    assert dataset.report.warnings == ["upload.zip: skipped unsupported files: bundle/picture.png"]


def test_several_tables_are_concatenated_with_columns_unioned(news: pd.DataFrame) -> None:
    first = news.head(3)[["text", "label"]]
    second = news.iloc[3:5][["text"]].assign(year=[2004, 2005])
    dataset = read_sources([csv_source(first, "a.csv"), csv_source(second, "b.csv")], IngestConfig(text_column="text"))
    docs = dataset.documents
    assert docs["doc_id"].tolist() == ["a:1", "a:2", "a:3", "b:1", "b:2"]
    assert docs["source_file"].tolist() == ["a.csv"] * 3 + ["b.csv"] * 2
    assert docs["label"].tolist()[:3] == first["label"].tolist()
    assert docs["year"].tolist()[3:] == [2004, 2005]
    assert docs["title"].isna().all()


def test_preview_shows_raw_columns(news: pd.DataFrame) -> None:
    preview = preview_sources([csv_source(news)], n_rows=5)
    assert list(preview.columns) == ["id", "title", "text", "label"]
    assert len(preview) == 5
    assert preview["id"].tolist() == news["id"].head(5).tolist()
    text_preview = preview_sources([("a.txt", b"hello there")])
    assert text_preview[["title", "text"]].to_dict("records") == [{"title": "a", "text": "hello there"}]


def test_guess_text_column(news: pd.DataFrame) -> None:
    assert guess_text_column(news) == "text"
    assert guess_text_column(news[["id", "title", "label"]]) == "title"
    with raises("no text-like column; the columns are: a, b"):
        guess_text_column(pd.DataFrame({"a": [1, 2], "b": ["12", "34"]}))


def test_a_category_or_an_id_chosen_as_the_text_is_named_in_a_warning(
    tmp_path: Path, bbc: pd.DataFrame, mtsamples: pd.DataFrame
) -> None:
    """Issue 26: a category column (14 values) chosen as the text gave a run rated good; ingest now says so."""
    for frame in (bbc, mtsamples):
        assert (
            text_column_problem(frame["text"], "text") is None and text_column_problem(frame["title"], "title") is None
        )
    mixed = bbc.sample(len(bbc), random_state=0)  # the file is sorted by category
    category = text_column_problem(mixed["label"], "label")
    examples = ", ".join(f"“{value}”" for value in mixed["label"].unique()[:3])
    assert category == (
        f"The text column “label” looks like a category, not text: its first 500 documents hold only 5 different "
        f"values ({examples}…). Prisma finds concepts in running text (notes, articles, abstracts): choose the column "
        "that holds it, otherwise the concepts found will only repeat these values."
    )
    assert "hold only 1 different value (“business”…)" in text_column_problem(bbc["label"], "label")
    specialties = mtsamples["label"].head(500).nunique()
    assert f"only {specialties} different values" in text_column_problem(mtsamples["label"], "specialty")
    ids = text_column_problem(mtsamples["id"], "id")
    assert ids.startswith("The text column “id” holds very short values (“mts-") and "like ids, codes" in ids
    assert text_column_problem(bbc["label"].head(10), "label") is not None  # 10 values: too few to count, but short

    path = tmp_path / "bbc.parquet"
    bbc.head(300).to_parquet(path)
    warned = read_paths([path], IngestConfig(text_column="label", id_column="id")).report.warnings
    assert warned[0] == "bbc.parquet: " + text_column_problem(bbc["label"].head(300), "label")
    assert read_paths([path], BY_COLUMN).report.warnings == []


def test_every_supported_extension_reads_a_file_of_that_format(tmp_path: Path, news: pd.DataFrame) -> None:
    """Each extension the uploader offers reads a real file saved in that format back to the article's text."""
    article = news.head(1)
    text = article["text"].iloc[0]
    documents = {
        ".txt": text.encode(),
        ".md": text.encode(),
        ".pdf": pdf_of_text(text),
        ".docx": docx_of_text(text),
        ".zip": zip_of({"article.txt": text.encode()}),
    }
    for extension in SUPPORTED_EXTENSIONS:
        path = tmp_path / f"news{extension}"
        if extension in documents:
            path.write_bytes(documents[extension])
        else:
            write_table(article, path)
        docs = read_paths([path], IngestConfig(text_column="text")).documents
        assert [squash(read) for read in docs["text"]] == [squash(text)], extension


# -- bad inputs -------------------------------------------------------------------------------------------------


def test_empty_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.write_bytes(b"")
    with raises("empty.csv: the file is empty (0 bytes)"):
        read_paths([path])


def test_whitespace_and_missing_texts_are_excluded_and_listed() -> None:
    frame = pd.DataFrame({"id": ["a", "b", "c", "d", "e"], "text": ["real text", "   ", None, "\n\t", "more text"]})
    dataset = read_sources([csv_source(frame)], BY_COLUMN)
    assert dataset.documents["doc_id"].tolist() == ["a", "e"]
    assert dataset.report.empty_ids == ["b", "c", "d"]
    only_blank = pd.DataFrame({"id": ["a", "b"], "text": ["  ", None]})
    with raises("no non-empty documents"):
        read_sources([csv_source(only_blank)], BY_COLUMN)


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


def test_duplicated_ids_are_renamed_and_listed() -> None:
    frame = pd.DataFrame({"id": ["7", "7", "8", "7#2", "7"], "text": ["a", "b", "c", "d", "e"]})
    dataset = read_sources([csv_source(frame)], IngestConfig(text_column="text", id_column="id"))
    assert dataset.documents["doc_id"].tolist() == ["7", "7#3", "8", "7#2", "7#4"]
    assert dataset.report.renamed_ids == {"7#3": "7", "7#4": "7"}
    assert dataset.documents["doc_id"].is_unique


def test_same_file_name_twice_gets_unique_ids() -> None:
    dataset = read_sources([("a.txt", b"first"), ("a.txt", b"second")])
    assert dataset.documents["doc_id"].tolist() == ["a.txt", "a.txt#2"]
    assert dataset.report.renamed_ids == {"a.txt#2": "a.txt"}


def test_non_string_and_missing_ids() -> None:
    content = b"id,text\n101,first\n,second\n103,third\n"
    dataset = read_sources([("table.csv", content)], BY_COLUMN)
    assert dataset.documents["doc_id"].tolist() == ["101", "2", "103"]  # the missing id gets its row number
    assert dataset.documents["doc_id"].map(type).eq(str).all()
    numbers = pd.DataFrame({"id": [1.0, 2.0, np.nan], "text": ["x", "y", "z"]})
    parquet = io.BytesIO()
    numbers.to_parquet(parquet)
    from_parquet = read_sources([("n.parquet", parquet.getvalue())], BY_COLUMN)
    assert from_parquet.documents["doc_id"].tolist() == ["1", "2", "3"]
    leading_zeros = read_sources([("z.csv", b"id,text\n007,x\n008,y\n")], BY_COLUMN)
    assert leading_zeros.documents["doc_id"].tolist() == ["007", "008"]


def test_duplicate_texts_are_kept_and_listed() -> None:
    frame = pd.DataFrame({"id": ["a", "b", "c", "d"], "text": ["same", "other", "same", "same"]})
    dataset = read_sources([csv_source(frame)], BY_COLUMN)
    assert dataset.documents["doc_id"].tolist() == ["a", "b", "c", "d"]
    assert dataset.report.duplicate_text_ids == ["c", "d"]


def test_html_and_formulas_are_kept_verbatim() -> None:
    texts = ["<script>alert('x')</script><b>bold</b>", "=SUM(A1)", "+cmd|' /C calc'!A0", "@risk; -2+3"]
    frame = pd.DataFrame({"id": ["h", "f", "p", "a"], "text": texts})
    from_csv = read_sources([csv_source(frame)], BY_COLUMN)
    assert from_csv.documents["text"].tolist() == texts
    jsonl = "\n".join(json.dumps(record) for record in frame.to_dict("records")).encode()
    from_jsonl = read_sources([("x.jsonl", jsonl)], BY_COLUMN)
    assert from_jsonl.documents["text"].tolist() == texts


def test_document_length_limit(news: pd.DataFrame) -> None:
    million = ("word " * 200_000)[:1_000_000]
    dataset = read_sources([("long.txt", million.encode())])
    assert len(dataset.documents["text"].iloc[0]) == 1_000_000
    frame = pd.DataFrame({"id": ["short", "huge"], "text": ["fine", "x" * 2_000_001]})
    with raises("table.csv: document 'huge' has 2,000,001 characters; the limit is 2,000,000"):
        read_sources([csv_source(frame)], BY_COLUMN)


def test_reserved_metadata_names_are_kept_under_new_names() -> None:
    frame = pd.DataFrame(
        {"body": ["long body one", "long body two"], "text": ["t1", "t2"], "doc_id": [1, 2], "text_hash": ["h1", "h2"]}
    )
    dataset = read_sources([csv_source(frame)], IngestConfig(text_column="body"))
    assert list(dataset.documents.columns) == [
        "doc_id",
        "title",
        "text",
        "text_hash",
        "text_original",
        "doc_id_original",
        "text_hash_original",
    ]
    assert dataset.documents["text_hash"].tolist() == [text_hash("long body one"), text_hash("long body two")]
    assert dataset.documents["text_hash_original"].tolist() == ["h1", "h2"]
    assert dataset.documents["text"].tolist() == ["long body one", "long body two"]
    assert dataset.documents["doc_id_original"].tolist() == [1, 2]


def test_json_nested_fields_and_lists() -> None:
    records = [{"text": "first doc", "meta": {"author": "Ann"}, "tags": ["a", "b"]}, {"text": "second doc"}]
    docs = read_sources([("r.json", json.dumps(records).encode())]).documents
    assert docs["meta.author"].tolist()[0] == "Ann"
    assert docs["tags"].tolist()[0] == '["a", "b"]'
    plain = read_sources([("s.json", b'["one text", "another text"]')]).documents
    assert plain["text"].tolist() == ["one text", "another text"]


def test_hundred_thousand_row_csv(tmp_path: Path, ag_news: pd.DataFrame) -> None:
    repeats = -(-100_000 // len(ag_news))
    frame = pd.concat([ag_news] * repeats, ignore_index=True).head(100_000)
    frame["id"] = [f"doc-{row}" for row in range(100_000)]
    path = tmp_path / "big.csv"
    frame.to_csv(path, index=False)
    started = time.perf_counter()
    dataset = read_paths([path], IngestConfig(text_column="text", id_column="id"))
    seconds = time.perf_counter() - started
    assert dataset.report.n_documents == 100_000
    assert dataset.documents["doc_id"].is_unique
    assert dataset.documents["text"].iloc[99_999] == frame["text"].iloc[99_999]
    assert len(dataset.report.duplicate_text_ids) == 100_000 - frame["text"].nunique()
    assert seconds < 20, f"100,000 rows took {seconds:.1f} s"


def test_semicolon_csv_is_sniffed() -> None:
    content = "id;text;price\n1;Bonjour, le monde;3,5\n2;Deuxième texte, avec virgules;4\n".encode()
    docs = read_sources([("fr.csv", content)], BY_COLUMN).documents
    assert docs["text"].tolist() == ["Bonjour, le monde", "Deuxième texte, avec virgules"]
    assert docs["price"].tolist() == ["3,5", "4"]


def test_json_lines_saved_as_json_are_read() -> None:
    content = b'{"text": "first line doc"}\n{"text": "second line doc"}\n'
    assert read_sources([("lines.json", content)]).documents["text"].tolist() == ["first line doc", "second line doc"]


def test_excel_reads_the_first_sheet_and_says_so(tmp_path: Path, news: pd.DataFrame) -> None:
    path = tmp_path / "book.xlsx"
    with pd.ExcelWriter(path) as writer:
        news.head(5).to_excel(writer, sheet_name="articles", index=False)
        news.tail(5).to_excel(writer, sheet_name="more", index=False)
    dataset = read_paths([path], BY_COLUMN)
    assert dataset.documents["doc_id"].tolist() == news["id"].head(5).tolist()
    assert "book.xlsx: read only the first sheet, 'articles', of 2" in dataset.report.warnings


def test_pdf_encrypted_without_user_password_opens(news: pd.DataFrame) -> None:
    article = news["text"].iloc[3]
    writer = pypdf.PdfWriter(clone_from=io.BytesIO(pdf_of_text(article)))
    writer.encrypt(user_password="", owner_password="owner-only", algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    document = read_sources([("protected.pdf", buffer.getvalue())]).documents.iloc[0]
    assert squash(document["text"]) == squash(article)


def test_binary_garbage_named_txt() -> None:
    with raises("photo.txt: does not look like text (binary content)"):
        read_sources([("photo.txt", random.Random(1).randbytes(3000))])


def test_preview_of_a_zip_lists_member_columns(news: pd.DataFrame) -> None:
    archive = zip_of({"a.csv": news.head(3).to_csv(index=False).encode(), "b.csv": b"text,year\nhello world,2001\n"})
    preview = preview_sources([("two.zip", archive)])
    assert list(preview.columns) == ["id", "title", "text", "label", "year"]
    assert len(preview) == 4


def test_the_title_column_is_the_one_named_title_or_headline_for_the_page_and_the_core_alike(bbc):
    frame = bbc.head(5)[["id", "text", "label"]].rename(columns={"label": " Headline "})
    assert guess_title_column(frame) == " Headline "
    assert guess_title_column(frame, exclude={" Headline "}) is None
    assert guess_title_column(frame[["id", "text"]]) is None
    ingested = read_sources([("news.csv", frame.to_csv(index=False).encode())], BY_COLUMN)
    assert ingested.documents["title"].tolist() == frame[" Headline "].tolist()
