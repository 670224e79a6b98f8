"""Every format the readers take, read back to the documents and metadata saved in it; which columns are the
text and the title.
"""

import io
import json
from pathlib import Path

import docx
import numpy as np
import pandas as pd
import pypdf
import pytest
from document_files import docx_of_text, pdf_of_text, zip_of
from ingest_helpers import BY_COLUMN, TABLE_FILES, csv_source, raises, squash, write_table

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


def test_json_nested_fields_and_lists() -> None:
    records = [{"text": "first doc", "meta": {"author": "Ann"}, "tags": ["a", "b"]}, {"text": "second doc"}]
    docs = read_sources([("r.json", json.dumps(records).encode())]).documents
    assert docs["meta.author"].tolist()[0] == "Ann"
    assert docs["tags"].tolist()[0] == '["a", "b"]'
    plain = read_sources([("s.json", b'["one text", "another text"]')]).documents
    assert plain["text"].tolist() == ["one text", "another text"]


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
