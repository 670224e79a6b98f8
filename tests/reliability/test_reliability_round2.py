"""Reliability, round 2 (issue 15): the cases a probe of 41 found broken, each on real parts.

Families rebuilt by two sessions at once, exports aimed at the workspace, metadata mixing numbers and text, sheets
of millions of rows, settings out of range, embeddings with no variance, caches the command line made stale, a disk
full during the weights write, space never reclaimed, spreadsheet formulas in CSV downloads, and minor readers.
"""

import io
import json
import math
import os
import re
import subprocess
import sys
import time
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import openpyxl
import pandas as pd
import pytest
from app_helpers import new_app, open_page, texts
from reliability_helpers import REPO, SMALL_SAE, bbc_subset, run_cli_with_file_limit, sae_flags, snapshot

from prisma_core import cli, pipeline
from prisma_core.embed import EmbedConfig, model_key
from prisma_core.errors import IngestError, NotFoundError, TrainingError
from prisma_core.explore import spreadsheet_csv
from prisma_core.families import FamilyConfig, find_families
from prisma_core.ingest import IngestConfig, preview_sources, read_sources
from prisma_core.progress import Progress
from prisma_core.sae import SAEConfig, check_config, train_sae
from prisma_core.store import WORKSPACE_ENV, NamedFamily, Workspace
from ui.themes import ALL_THEMES

KEY = model_key(EmbedConfig())
BY_ID = IngestConfig(text_column="text", id_column="id")
YEARS = [2001, "unknown", 2003, None]
"""A spreadsheet-style metadata column: numbers, text and blanks in one column."""


class Trained:
    """60 BBC articles with a `year` column mixing numbers and text, embedded and trained once."""

    def __init__(self, root: Path, bbc: pd.DataFrame) -> None:
        self.path = root / "workspace"
        workspace = Workspace(self.path)
        frame = bbc_subset(bbc, 12)[["id", "text"]].assign(year=[YEARS[i % 4] for i in range(60)])
        records = "\n".join(json.dumps(record) for record in frame.to_dict(orient="records"))
        self.dataset_id, _ = pipeline.ingest(workspace, [("news.jsonl", records.encode())], config=BY_ID)
        pipeline.embed_dataset(workspace, self.dataset_id)
        self.run_id = pipeline.train_run(workspace, self.dataset_id, SMALL_SAE).run_id
        self.codes = pipeline.load_run(workspace, self.run_id).codes


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, bbc: pd.DataFrame) -> Trained:
    return Trained(tmp_path_factory.mktemp("round2"), bbc)


def cli_main(*args: str, workspace: Path) -> int:
    return cli.main([*args, "--workspace", str(workspace)])


def error_lines(stderr: str) -> list[str]:
    return re.findall(r"error: [^\n]*", stderr)


# -- 1. two family rebuilds at once ------------------------------------------------------------------------------


def members_of(families: list[NamedFamily]) -> list[list[int]]:
    return [family.members for family in sorted(families, key=lambda f: f.family_id)]


def test_concurrent_family_rebuilds_keep_exactly_one_complete_set(trained: Trained) -> None:
    # two rebuilds with different results (on these 60 articles tau changes nothing: the forest's edges weigh 1)
    expected = {n: [f.members for f in find_families(trained.codes, FamilyConfig(iterations=n))] for n in (1, 3)}
    assert len(expected[1]) != len(expected[3])
    workspace = Workspace(trained.path)
    allowed = [*expected.values(), members_of(workspace.families(trained.run_id))]
    start = str(time.time() + 12)
    writer = str(REPO / "tests" / "helpers" / "reliability_family_writer.py")
    writers = [
        subprocess.Popen(
            [sys.executable, writer, str(trained.path), trained.run_id, start, str(iterations), "6"],
            cwd=REPO,
            env=os.environ | {"PYTHONPATH": str(REPO)},
            stderr=subprocess.PIPE,
            text=True,
        )
        for iterations in expected
    ]
    seen = 0
    while any(writer.poll() is None for writer in writers):  # a reader never sees a mix, or no families
        assert members_of(workspace.families(trained.run_id)) in allowed
        seen += 1
    for writer in writers:
        assert writer.wait() == 0, writer.stderr.read()

    rows = workspace.db.open_table("families").search().where(f"run_id = '{trained.run_id}'").limit(None).to_pandas()
    assert rows["generation"].nunique() == 1
    assert rows["family_id"].is_unique
    assert members_of(workspace.families(trained.run_id)) in expected.values()
    assert seen > 10


# -- 2. and 3. export ---------------------------------------------------------------------------------------------


def test_export_into_a_run_folder_is_refused_and_the_run_still_opens(trained: Trained, capsys) -> None:
    run_folder = trained.path / "runs" / trained.run_id
    before = {path.name: path.read_bytes() for path in run_folder.iterdir()}

    assert cli_main("export", "--out", str(run_folder), workspace=trained.path) == 2
    (message,) = error_lines(capsys.readouterr().err)
    assert "inside the workspace" in message
    assert {path.name: path.read_bytes() for path in run_folder.iterdir()} == before
    assert pipeline.load_run(Workspace(trained.path), trained.run_id).record.run_id == trained.run_id


def test_export_never_overwrites_a_file_it_did_not_write(trained: Trained, tmp_path: Path, capsys) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    assert cli_main("export", "--out", str(a_file), workspace=trained.path) == 2
    assert "is a file" in error_lines(capsys.readouterr().err)[0]
    assert a_file.read_text() == "mine"

    foreign = tmp_path / "project"
    foreign.mkdir()
    (foreign / "config.json").write_text('{"mine": true}')
    assert cli_main("export", "--out", str(foreign), workspace=trained.path) == 2
    assert "not written by a Prisma export" in error_lines(capsys.readouterr().err)[0]
    assert (foreign / "config.json").read_text() == '{"mine": true}'
    assert sorted(path.name for path in foreign.iterdir()) == ["config.json"]

    out = tmp_path / "export"
    for _ in range(2):  # an earlier export is replaced
        assert cli_main("export", "--out", str(out), workspace=trained.path) == 0
    assert json.loads((out / "config.json").read_text())["run_id"] == trained.run_id


def test_metadata_mixing_numbers_and_text_exports_every_value(trained: Trained, tmp_path: Path) -> None:
    workspace = Workspace(trained.path)
    paths = pipeline.export_run(workspace, trained.run_id, tmp_path / "export")

    documents = pd.read_parquet(tmp_path / "export" / "documents.parquet")
    assert documents["year"].fillna("(blank)").tolist() == ["(blank)" if y is None else str(y) for y in YEARS] * 15
    assert all(path.exists() for path in paths)
    assert not [path for path in tmp_path.iterdir() if path.name.startswith(".prisma-export-")]  # no leftovers
    groups = workspace.metadata(trained.dataset_id)["year"].fillna("(missing)")
    assert set(groups) == {"2001", "unknown", "2003", "(missing)"}


# -- 4. memory bombs: every table format has a row limit, sheets are streamed --------------------------------------


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


# -- 5. tracebacks instead of `error:` and exit 2 ----------------------------------------------------------------

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


@pytest.mark.parametrize(
    "flags",
    [
        ["run", "{file}", "--embed-batch-size", "0"],
        ["run", "{file}", "--tau", "2"],
        ["run", "{file}", "--iterations", "0"],
        ["run", "{file}", "--min-family-size", "1"],
        ["run", "{file}", "--n-features", "38400000"],
        ["families", "--tau", "2"],
        ["label", "--timeout-s", "0"],
        ["label", "--n-evidence", "0"],
        ["score", "--n-evidence", "0"],
    ],
)
def test_settings_out_of_range_fail_before_any_work(trained: Trained, tmp_path: Path, capsys, flags) -> None:
    notes = tmp_path / "notes.csv"
    notes.write_text("text\n" + "a note about chest pain\n" * 30)
    workspace = Workspace(trained.path)
    before = snapshot(workspace)

    status = cli_main(*[flag.format(file=notes) for flag in flags], workspace=trained.path)

    assert status == 2
    (line,) = error_lines(capsys.readouterr().err)
    assert flags[-2].lstrip("-").replace("-", "_").removeprefix("embed_") in line
    assert snapshot(Workspace(trained.path)) == before  # nothing ingested, embedded or trained


def test_training_that_cannot_fit_in_memory_is_refused_before_allocating() -> None:
    with pytest.raises(TrainingError, match=r"needs about [\d.]+ GB of memory; [\d.]+ GB are free"):
        check_config(SAEConfig(n_features=98_304), 10_000, 100_000)


def test_dataset_deleted_while_it_trains_gives_a_message_and_no_run(trained: Trained, bbc: pd.DataFrame) -> None:
    workspace = Workspace(trained.path)
    upload = [("other.csv", bbc_subset(bbc, 12, skip=12).to_csv(index=False).encode())]
    dataset_id, _ = pipeline.ingest(workspace, upload, config=BY_ID)
    pipeline.embed_dataset(workspace, dataset_id)
    runs_before = sorted(path.name for path in (trained.path / "runs").iterdir())

    deleted = []

    def delete_during_training(event: Progress) -> None:
        if event.stage == "train_sae" and not deleted:
            workspace.delete_dataset(dataset_id)  # as another session would, from the Datasets page
            deleted.append(dataset_id)

    with pytest.raises(NotFoundError, match="deleted while its SAE was training"):
        pipeline.train_run(workspace, dataset_id, SMALL_SAE, progress=delete_during_training)
    assert [run.run_id for run in workspace.runs(dataset_id)] == []
    assert sorted(path.name for path in (trained.path / "runs").iterdir()) == runs_before


# -- 6. held-out FVU with no variance to explain ---------------------------------------------------------------


def test_identical_documents_are_refused_with_no_variance_to_explain(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "workspace")
    upload = [("same.csv", ("text\n" + "the same note about chest pain\n" * 60).encode())]
    dataset_id, _ = pipeline.ingest(workspace, upload)
    pipeline.embed_dataset(workspace, dataset_id)
    with pytest.raises(TrainingError, match="no variance to explain"):
        pipeline.train_run(workspace, dataset_id, SMALL_SAE)
    assert workspace.runs() == []


def test_a_held_out_set_with_no_variance_reports_no_fvu(trained: Trained) -> None:
    vectors = Workspace(trained.path).vectors(trained.dataset_id, KEY)
    metrics = train_sae(vectors, SAEConfig(n_features=64, k=4, epochs=2, holdout_fraction=0.01)).metrics
    assert metrics["n_holdout"] == 1
    assert math.isnan(metrics["fvu_holdout"]) and math.isnan(metrics["variance_explained_holdout"])
    assert metrics["fvu_holdout_note"] == "the held-out documents do not vary: no variance to explain"


# -- 7. the app sees what the command line changed ----------------------------------------------------------------


def families_caption(at) -> str:
    """The count of every family of the run (the page opens on one theme's families)."""
    at.selectbox(key="family_theme").set_value(ALL_THEMES).run()
    return next(text for text in texts(at.caption) if " families over " in text)


def test_new_sessions_show_families_rebuilt_from_the_command_line(trained: Trained, monkeypatch) -> None:
    monkeypatch.setenv(WORKSPACE_ENV, str(trained.path))
    counts = {n: len(find_families(trained.codes, FamilyConfig(iterations=n))) for n in (1, 3)}
    assert counts[1] != counts[3]
    assert cli_main("families", "--iterations", "1", workspace=trained.path) == 0
    first = open_page(new_app(trained.dataset_id, trained.run_id), "families")
    assert families_caption(first).startswith(f"{counts[1]} families over")

    assert cli_main("families", "--iterations", "3", workspace=trained.path) == 0

    second = open_page(new_app(trained.dataset_id, trained.run_id), "families")
    assert not second.exception
    assert families_caption(second).startswith(f"{counts[3]} families over")


# -- 8. a full disk during the weights write -------------------------------------------------------------------


def test_full_disk_during_the_weights_write_leaves_no_run_folder(trained: Trained) -> None:
    workspace = Workspace(trained.path)
    (trained.path / "maintenance.json").write_text(json.dumps({"reclaimed_at": datetime.now(UTC).isoformat()}))
    before = snapshot(workspace)

    failed = run_cli_with_file_limit(  # 1 KB per file: small marker files fit, nothing LanceDB commits does
        "train", "--dataset", trained.dataset_id, *sae_flags(), workspace=trained.path, limit_kb=1
    )

    assert failed.returncode == 2, failed.stderr
    (message,) = error_lines(failed.stderr)
    assert message.startswith("error: Could not write the SAE to") and "File too large" in message
    assert snapshot(Workspace(trained.path)) == before  # no folder left, no table version written
    listed = run_cli_with_file_limit("list", workspace=trained.path, limit_kb=1)  # and the still-full disk opens
    assert listed.returncode == 0, listed.stderr
    assert trained.run_id in listed.stdout


# -- 9. disk space is reclaimed ------------------------------------------------------------------------------------


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def test_deleted_dataset_frees_its_space_once_old_versions_expire(tmp_path: Path, ag_news: pd.DataFrame) -> None:
    workspace = Workspace(tmp_path / "workspace")
    kept, _ = pipeline.ingest(workspace, [("small.csv", ag_news.head(50).to_csv(index=False).encode())])
    big, _ = pipeline.ingest(workspace, [("big.csv", ag_news.to_csv(index=False).encode())])
    documents = workspace.path / "lancedb" / "documents.lance"
    full = folder_bytes(documents)
    version_with_big = workspace.db.open_table("documents").version
    workspace.delete_dataset(big)
    table = workspace.db.open_table("documents")

    workspace.reclaim_space()  # the default keeps the last hour's versions: the deleted rows can still be recovered
    table.checkout(version_with_big)
    assert table.count_rows() == 50 + len(ag_news)
    assert folder_bytes(documents) >= full

    workspace.reclaim_space(keep_versions_for=timedelta(0))
    print(f"documents.lance: {full / 2**20:.1f} MB with the dataset, {folder_bytes(documents) / 2**20:.2f} MB after")
    assert folder_bytes(documents) < full / 20
    assert len(Workspace(workspace.path).documents(kept)) == 50


def test_opening_a_workspace_writes_nothing_and_a_writer_cleans_up_once_a_day(
    tmp_path: Path, ag_news: pd.DataFrame, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = Workspace(tmp_path / "workspace")
    for number in range(3):
        pipeline.ingest(workspace, [(f"part{number}.csv", ag_news.head(20).to_csv(index=False).encode())])
    marker = workspace.path / "maintenance.json"
    overdue = json.dumps({"reclaimed_at": (datetime.now(UTC) - timedelta(days=2)).isoformat()})
    marker.write_text(overdue)
    fragments = workspace.db.open_table("documents").stats()["fragment_stats"]["num_fragments"]
    versions = {name: workspace.db.open_table(name).version for name in workspace.db.list_tables().tables}

    assert len(Workspace(workspace.path).datasets()) == 3  # opening and reading
    assert cli.main(["list", "--workspace", str(workspace.path)]) == 0  # `prisma list`
    assert "'part2'  20 documents" in capsys.readouterr().out

    assert marker.read_text() == overdue  # overdue, and still not cleaned up
    assert workspace.db.open_table("documents").stats()["fragment_stats"]["num_fragments"] == fragments > 1
    assert {name: workspace.db.open_table(name).version for name in versions} == versions

    pipeline.ingest(workspace, [("part3.csv", ag_news.head(20).to_csv(index=False).encode())])  # a writer

    assert datetime.fromisoformat(json.loads(marker.read_text())["reclaimed_at"]) > datetime.now(UTC) - timedelta(1)
    assert workspace.db.open_table("documents").stats()["fragment_stats"]["num_fragments"] < fragments  # compacted
    assert len(workspace.datasets()) == 4


# -- 11. CSV downloads are safe to open in a spreadsheet -----------------------------------------------------------


def test_csv_cells_that_would_run_as_formulas_are_neutralised(trained: Trained) -> None:
    formulas = ['=HYPERLINK("http://evil.example","x")', "+1+1", "-2+3", "@SUM(A1)", "\t=1"]
    frame = pd.DataFrame({"label": [*formulas, "chest pain"], "score": [-0.5, 1.0, 2.0, 3.0, 4.0, 5.0]})

    cells = pd.read_csv(io.StringIO(spreadsheet_csv(frame)), keep_default_na=False)

    assert cells["label"].tolist() == [f"'{text}" for text in formulas] + ["chest pain"]
    assert cells["score"].tolist() == [-0.5, 1.0, 2.0, 3.0, 4.0, 5.0]  # numbers stay numbers


# -- 12. minor -------------------------------------------------------------------------------------------------------


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


def test_missing_gpu_is_reported_before_anything_is_written(trained: Trained) -> None:
    workspace = Workspace(trained.path)
    before = snapshot(workspace)
    with pytest.raises(TrainingError, match="no CUDA GPU"):
        pipeline.train_run(workspace, trained.dataset_id, SAEConfig(n_features=64, k=4, device="cuda"))
    assert snapshot(Workspace(trained.path)) == before
