"""Files that were tracebacks, memory bombs or mojibake: sheets of millions of rows or shared strings, hostile
XML and JSON, list columns, formula-only and categorical columns, colliding keys, other encodings (rounds 2
and 3).
"""

import io
import json
import os
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import openpyxl
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from reliability_helpers import REPO, cli_main, error_lines

from prisma_core import pipeline
from prisma_core.errors import IngestError
from prisma_core.ingest import IngestConfig, preview_paths, preview_sources, read_sources
from prisma_core.ingest.config import MAX_ROWS
from prisma_core.ingest.encodings import text_encoding
from prisma_core.ingest.readers import SHARED_STRINGS_PER_ROW
from prisma_core.store import Workspace

# -- memory bombs: every table format has a row limit, sheets are streamed --------------------------------------------


def sheet_xlsx(n_rows: int, declare_size: bool = True) -> bytes:
    """An .xlsx written directly (fast for millions of rows): columns text and n, one row per note."""
    rows = "".join(
        f'<row r="{r}"><c r="A{r}" t="inlineStr"><is><t>note {r}</t></is></c><c r="B{r}"><v>{r}</v></c></row>'
        for r in range(2, n_rows + 2)
    )
    dimension = f'<dimension ref="A1:B{n_rows + 1}"/>' if declare_size else ""
    return workbook_with_sheet(
        f'<worksheet xmlns="{MAIN}">{dimension}<sheetData><row r="1"><c r="A1" t="inlineStr"><is><t>text</t></is>'
        f'</c><c r="B1" t="inlineStr"><is><t>n</t></is></c></row>{rows}</sheetData></worksheet>'
    )


MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
RELS = "http://schemas.openxmlformats.org/package/2006/relationships"
OFFICE = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"


def workbook_with_sheet(sheet_xml: str) -> bytes:
    sheet_type = "application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"
    book_type = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"
    parts = {
        "[Content_Types].xml": '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        f'<Override PartName="/xl/workbook.xml" ContentType="{book_type}"/>'
        f'<Override PartName="/xl/worksheets/sheet1.xml" ContentType="{sheet_type}"/></Types>',
        "_rels/.rels": f'<Relationships xmlns="{RELS}"><Relationship Id="rId1" '
        f'Type="{OFFICE}/officeDocument" Target="xl/workbook.xml"/></Relationships>',
        "xl/workbook.xml": f'<workbook xmlns="{MAIN}" xmlns:r="{OFFICE}"><sheets>'
        '<sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>',
        "xl/_rels/workbook.xml.rels": f'<Relationships xmlns="{RELS}"><Relationship Id="rId1" '
        f'Type="{OFFICE}/worksheet" Target="worksheets/sheet1.xml"/></Relationships>',
        "xl/worksheets/sheet1.xml": '<?xml version="1.0" encoding="UTF-8"?>' + sheet_xml,
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in parts.items():
            archive.writestr(name, text)
    return out.getvalue()


MEASURE = """
import sys, time
from prisma_core.errors import IngestError
from prisma_core.ingest import preview_sources, read_sources

def status(field):
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(field)) / 1024

upload = [("big.xlsx", open(sys.argv[1], "rb").read())]
before, started = status("VmRSS:"), time.perf_counter()
try:
    read_sources(upload)
    print("read")
except IngestError as error:
    print(error)
print(len(preview_sources(upload)), time.perf_counter() - started, status("VmHWM:") - before)
"""


def test_sheet_of_a_million_rows_is_refused_in_bounded_time_and_memory(tmp_path: Path) -> None:
    path = tmp_path / "big.xlsx"
    path.write_bytes(sheet_xlsx(1_200_000))

    measured = subprocess.run(
        [sys.executable, "-c", MEASURE, str(path)], cwd=REPO, capture_output=True, text=True, timeout=600
    )

    assert measured.returncode == 0, measured.stderr
    message, numbers = measured.stdout.strip().splitlines()[-2:]
    assert message == "big.xlsx: has more than 1,000,000 rows, the limit per table; split it into smaller files"
    preview_rows, seconds, peak_growth_mb = (float(n) for n in numbers.split())
    size_mb = path.stat().st_size / 2**20
    print(f"{size_mb:.0f} MB sheet: refused and previewed in {seconds:.1f} s, memory +{peak_growth_mb:.0f} MB")
    assert preview_rows == 20  # the preview reads only the rows it shows
    assert seconds < 30 and peak_growth_mb < 200


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("undeclared.xlsx", sheet_xlsx(300, declare_size=False)),  # no <dimension>: counted while streaming
        ("rows.csv", ("text\n" + "a note\n" * 300).encode()),
        ("rows.jsonl", ('{"text": "a note"}\n' * 300).encode()),
        ("rows.json", json.dumps([{"text": "a note"}] * 300).encode()),
        ("rows.parquet", b"parquet"),
    ],
)
def test_every_table_format_has_a_row_limit_that_says_so(name: str, content: bytes) -> None:
    if name.endswith(".parquet"):
        buffer = io.BytesIO()
        pd.DataFrame({"text": ["a note"] * 300}).to_parquet(buffer, row_group_size=50)
        content = buffer.getvalue()
    with pytest.raises(IngestError, match=f"^{re.escape(name)}: has more than 100 rows, the limit per table"):
        read_sources([(name, content)], IngestConfig(max_rows=100))
    assert len(preview_sources([(name, content)], n_rows=20)) == 20
    assert read_sources([(name, content)], IngestConfig(max_rows=300)).report.n_documents == 300


# -- hostile files give an `error:` line and exit 2, not a traceback --------------------------------------------------

TRUNCATED_SHEET = f'<worksheet xmlns="{MAIN}"><sheetData><row r="1"><c r="A1" t="inlineStr"><is><t>te'
LAUGHS = "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 10))
BILLION_LAUGHS = (
    f'<!DOCTYPE s [<!ENTITY l0 "lol">{LAUGHS}]><worksheet xmlns="{MAIN}"><sheetData><row r="1">'
    '<c r="A1" t="inlineStr"><is><t>&l9;</t></is></c></row></sheetData></worksheet>'
)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("cut.xlsx", workbook_with_sheet(TRUNCATED_SHEET), "is not a valid Excel .xlsx workbook"),
        ("laughs.xlsx", workbook_with_sheet(BILLION_LAUGHS), "is not a valid Excel .xlsx workbook"),
        ("deep.json", b"[" * 100_000 + b"]" * 100_000, "is nested too deeply"),
        ("deep.jsonl", b'{"a": ' * 100_000 + b"1" + b"}" * 100_000, "line 1 is nested too deeply"),
    ],
)
def test_hostile_files_give_one_error_line(tmp_path: Path, capsys, name: str, content: bytes, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    assert cli_main("ingest", str(path), workspace=tmp_path / "workspace") == 2
    (line,) = error_lines(capsys.readouterr().err)
    assert line.startswith(f"error: {name}: {message}")


# -- columns and keys that read wrongly -------------------------------------------------------------------------------


def test_formula_only_sheet_columns_say_why_they_are_empty(tmp_path: Path) -> None:
    book = openpyxl.Workbook()  # openpyxl saves formulas without their results, like many generated sheets
    sheet = book.active
    sheet.append(["text", "n", "double"])
    for row in range(2, 12):
        sheet.append([f"note {row}", row, f"=B{row}*2"])
    buffer = io.BytesIO()
    book.save(buffer)

    dataset = read_sources([("totals.xlsx", buffer.getvalue())], IngestConfig(text_column="text"))

    assert dataset.documents["double"].isna().all()
    assert any("double" in warning and "formulas" in warning for warning in dataset.report.warnings)


def test_categorical_parquet_text_column_is_detected() -> None:
    frame = pd.DataFrame({"code": ["a", "b"] * 10, "note": ["a long note about chest pain", "another note"] * 10})
    buffer = io.BytesIO()
    frame.astype("category").to_parquet(buffer)

    dataset = read_sources([("notes.parquet", buffer.getvalue())])

    assert "notes.parquet: text column auto-detected as 'note'" in dataset.report.warnings
    assert dataset.documents["text"].tolist() == frame["note"].tolist()


def test_colliding_json_keys_keep_both_values() -> None:
    records = [{"text": "a note", "a.b": "dotted", "a": {"b": "nested"}}, {"text": "another", "a.b": "x"}]

    dataset = read_sources([("notes.json", json.dumps(records).encode())], IngestConfig(text_column="text"))

    assert dataset.documents["a.b"].tolist() == ["dotted", "x"]
    assert dataset.documents["a.b (2)"].tolist()[0] == "nested"
    assert any("a.b" in warning and "(2)" in warning for warning in dataset.report.warnings)


# -- lists in tables --------------------------------------------------------------------------------------------------


def test_a_parquet_list_column_is_stored_and_read_back_with_every_item(small_run, tmp_path: Path) -> None:
    articles = pd.read_parquet(small_run.corpus).head(3)
    lists = [list(range(2000)), [7], []]
    path = tmp_path / "with_lists.parquet"
    pq.write_table(pa.table({"id": articles["id"], "text": articles["text"], "positions": lists}), path)
    workspace = Workspace(tmp_path / "workspace")
    dataset_id, _ = pipeline.ingest(workspace, [path], "lists", IngestConfig(id_column="id"))

    stored = workspace.metadata(dataset_id)["positions"].tolist()
    assert [json.loads(value) for value in stored] == lists
    assert "..." not in stored[0]


def test_a_list_typed_text_column_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    path = tmp_path / "paragraphs.parquet"
    pq.write_table(pa.table({"id": ["a", "b"], "paragraphs": [["one", "two"], ["three"]], "n": [1, 2]}), path)
    workspace = Workspace(tmp_path / "workspace")
    with pytest.raises(IngestError, match="column 'paragraphs' holds lists, not text"):
        pipeline.ingest(workspace, [path], "x", IngestConfig(text_column="paragraphs", id_column="id"))
    assert workspace.datasets() == []


# -- encodings --------------------------------------------------------------------------------------------------------

RUSSIAN = [
    "Футбольный клуб «Спартак» выиграл чемпионат России.",
    "Болельщики праздновали победу всю ночь на улицах Москвы.",
]
JAPANESE = ["東京の天気は晴れです。今日は多くの人が公園で花見を楽しみました。", "経済ニュースでは円安が続いています。"]
ENCODED = [
    ("cp1251", RUSSIAN, "cp1251"),
    ("koi8_r", [text.replace("«", "").replace("»", "") for text in RUSSIAN], "koi8_r"),
    ("euc_jp", JAPANESE, "euc_jis_2004"),
    ("shift_jis", JAPANESE, "cp932"),
    ("utf_16_le", RUSSIAN, "utf_16_le"),
    ("utf_16_le", JAPANESE, "utf_16_le"),
]


@pytest.mark.parametrize(("encoding", "texts", "detected"), ENCODED)
def test_files_in_other_encodings_are_stored_as_the_right_text(
    tmp_path: Path, encoding: str, texts: list[str], detected: str
) -> None:
    table = "id,text\n" + "".join(f"{number},{text}\n" for number, text in enumerate(texts, start=1))
    on_disk = tmp_path / "notes.csv"  # read from disk in batches (the command line)
    on_disk.write_bytes(table.encode(encoding))
    uploaded = ("notes.txt", "\n\n".join(texts).encode(encoding))  # read whole (an upload)
    workspace = Workspace(tmp_path / "workspace")
    for source, expected in ((on_disk, texts), (uploaded, ["\n\n".join(texts)])):
        dataset_id, report = pipeline.ingest(workspace, [source], config=IngestConfig(id_column="id"))
        assert workspace.documents(dataset_id)["text"].tolist() == expected
        assert f"not UTF-8, decoded as {detected}" in " ".join(report.warnings)


RUSSIAN_NEWS = [
    *("Футбольный клуб выиграл важный матч в воскресенье.", "Правительство объявило новые меры поддержки."),
    *("Цены на нефть выросли на фоне новостей из Азии.", "Учёные представили результаты исследования климата."),
    *("Музыканты выступили в филармонии в субботу.", "Банк снизил ключевую ставку до семи процентов."),
    *("Жители города пожаловались на плохие дороги.", "Поезд прибыл на вокзал поздно ночью."),
]


def test_a_cp1251_table_of_russian_sentences_is_decoded_as_cp1251_whichever_rows_it_holds(tmp_path: Path) -> None:
    """Mac Cyrillic decodes these bytes as cleanly (only the capitals differ: a quotation mark where the Ф of
    "Футбольный" is); the encoding people actually save Russian text in wins."""
    chosen = [
        RUSSIAN_NEWS[i : i + 1] + RUSSIAN_NEWS[j : j + 1]
        for i in range(len(RUSSIAN_NEWS))
        for j in range(len(RUSSIAN_NEWS))
        if i != j
    ]
    for rows in chosen:
        data = ("text\n" + "".join(f"{row}\n" for row in rows)).encode("cp1251")
        warnings: list[str] = []
        assert data.decode(text_encoding("news.csv", data, "a text table", warnings)) == data.decode("cp1251"), rows
        assert warnings == ["news.csv: not UTF-8, decoded as cp1251"]
    on_disk = tmp_path / "news.csv"
    on_disk.write_bytes(("text\n" + "".join(f"{row}\n" for row in RUSSIAN_NEWS[7::-7][::-1])).encode("cp1251"))
    workspace = Workspace(tmp_path / "workspace")
    dataset_id, _ = pipeline.ingest(workspace, [on_disk])
    assert workspace.documents(dataset_id)["text"].tolist()[0] == "Футбольный клуб выиграл важный матч в воскресенье."


def test_a_table_mixing_utf8_and_cp1252_lines_keeps_both_as_written(tmp_path: Path) -> None:
    utf8 = ["Café crème à Zürich", "Müller sagt grüß Gott"]
    western = ["Crème brûlée au château", "Señor Peña, año nuevo"]
    data = ("text\n" + "".join(f'"{row}"\n' for row in utf8)).encode() + "".join(
        f'"{row}"\n' for row in western
    ).encode("cp1252")
    on_disk = tmp_path / "joined.csv"
    on_disk.write_bytes(data)
    workspace = Workspace(tmp_path / "workspace")
    for source in (on_disk, ("joined.csv", data)):  # read from disk in batches, and uploaded
        dataset_id, report = pipeline.ingest(workspace, [source])
        assert workspace.documents(dataset_id)["text"].tolist() == utf8 + western
        assert "joined.csv: mixes UTF-8 with another encoding; its other lines decoded as cp1252" in report.warnings


def workbook_with_shared_strings(n_strings: int) -> bytes:
    """An .xlsx of two rows whose shared strings table holds n_strings distinct texts (written as a stream)."""
    main = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    rels = "http://schemas.openxmlformats.org/package/2006/relationships"
    office = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    parts = {
        "[Content_Types].xml": '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        '<Override PartName="/xl/workbook.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
        '<Override PartName="/xl/worksheets/sheet1.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>'
        '<Override PartName="/xl/sharedStrings.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/></Types>',
        "_rels/.rels": f'<Relationships xmlns="{rels}"><Relationship Id="rId1" Type="{office}/officeDocument" '
        'Target="xl/workbook.xml"/></Relationships>',
        "xl/workbook.xml": f'<workbook xmlns="{main}" xmlns:r="{office}"><sheets><sheet name="S" sheetId="1" '
        'r:id="rId1"/></sheets></workbook>',
        "xl/_rels/workbook.xml.rels": f'<Relationships xmlns="{rels}"><Relationship Id="rId1" '
        f'Type="{office}/worksheet" Target="worksheets/sheet1.xml"/><Relationship Id="rId2" '
        f'Type="{office}/sharedStrings" Target="sharedStrings.xml"/></Relationships>',
        "xl/worksheets/sheet1.xml": f'<worksheet xmlns="{main}"><sheetData><row r="1"><c r="A1" t="s"><v>0</v></c>'
        '</row><row r="2"><c r="A2" t="s"><v>1</v></c></row></sheetData></worksheet>',
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in parts.items():
            archive.writestr(name, text)
        with archive.open("xl/sharedStrings.xml", "w") as strings:
            strings.write(f'<sst xmlns="{main}">'.encode())
            for start in range(0, n_strings, 100_000):
                block = range(start, min(start + 100_000, n_strings))
                strings.write("".join(f"<si><t>note {i}</t></si>" for i in block).encode())
            strings.write(b"</sst>")
    return out.getvalue()


def test_a_workbook_of_millions_of_shared_strings_is_refused_before_they_are_read(tmp_path: Path) -> None:
    workbook = workbook_with_shared_strings(SHARED_STRINGS_PER_ROW * MAX_ROWS + 1)
    workspace = Workspace(tmp_path / "workspace")
    started = time.monotonic()
    with pytest.raises(IngestError, match="holds more than 4,000,000 distinct texts"):
        pipeline.ingest(workspace, [("notes.xlsx", workbook)])
    assert time.monotonic() - started < 60 and workspace.datasets() == []
    small = workbook_with_shared_strings(2)  # the same workbook with its two texts reads
    dataset_id, _ = pipeline.ingest(workspace, [("notes.xlsx", small)], config=IngestConfig(text_column="note 0"))
    assert workspace.documents(dataset_id)["text"].tolist() == ["note 1"]


def test_a_device_a_pipe_and_a_folder_are_each_named_for_what_they_are(tmp_path: Path, capsys) -> None:
    pipe = tmp_path / "notes.csv"
    os.mkfifo(pipe)
    folder = tmp_path / "more.csv"
    folder.mkdir()
    expected = {
        "/dev/zero": "/dev/zero: is a device, not a file",
        str(pipe): f"{pipe}: is a pipe or a socket, not a file; save what it gives to a file first",
        str(folder): f"{folder}: is a folder, not a file; name the files in it, or a ZIP of them",
        str(tmp_path / "gone.csv"): f"{tmp_path / 'gone.csv'}: file not found",
    }
    for path, message in expected.items():
        assert cli_main("ingest", path, workspace=tmp_path / "workspace") == 2
        assert error_lines(capsys.readouterr().err) == [f"error: {message}"]
        with pytest.raises(IngestError) as raised:
            preview_paths([path])  # what the command line previews to guess the id column
        assert str(raised.value) == message
    assert Workspace(tmp_path / "workspace").datasets() == []
