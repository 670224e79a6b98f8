"""Exports never overwrite what they did not write and keep every value; CSV downloads are safe to open in a
spreadsheet (rounds 2 and 3).
"""

import io
import json
import os
import stat
from pathlib import Path

import pandas as pd
from reliability_helpers import YEARS, Trained, cli_main, error_lines

from prisma_core import pipeline
from prisma_core.reading.explore import spreadsheet_csv
from prisma_core.store import Workspace

# -- exports ----------------------------------------------------------------------------------------------------------


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


def test_export_counts_the_themes_stored_when_a_kill_cut_off_their_record(workspace: Workspace, tmp_path: Path) -> None:
    run_id = workspace.run_or_latest().run_id
    themes = workspace.groups.themes(run_id)
    workspace.groups.save_themes(run_id, themes[:3])  # saved, then killed before the themes stage record
    pipeline.export_run(workspace, run_id, tmp_path / "export")
    config = json.loads((tmp_path / "export" / "config.json").read_text())
    assert config["metrics"]["n_themes"] == 3 == len(json.loads((tmp_path / "export" / "themes.json").read_text()))
    assert config["metrics"]["n_families"] == len(workspace.groups.families(run_id))


# -- 11. CSV downloads are safe to open in a spreadsheet -----------------------------------------------------------


def test_csv_cells_that_would_run_as_formulas_are_neutralised(trained: Trained) -> None:
    formulas = ['=HYPERLINK("http://evil.example","x")', "+1+1", "-2+3", "@SUM(A1)", "\t=1"]
    frame = pd.DataFrame({"label": [*formulas, "chest pain"], "score": [-0.5, 1.0, 2.0, 3.0, 4.0, 5.0]})

    cells = pd.read_csv(io.StringIO(spreadsheet_csv(frame)), keep_default_na=False)

    assert cells["label"].tolist() == [f"'{text}" for text in formulas] + ["chest pain"]
    assert cells["score"].tolist() == [-0.5, 1.0, 2.0, 3.0, 4.0, 5.0]  # numbers stay numbers


def test_csv_downloads_neutralise_formulas_in_column_names_too() -> None:
    frame = pd.DataFrame({"=1+2": ["=1+1"], "@SUM(A1)": [3], "plain": ["-x"]})
    header, row = spreadsheet_csv(frame).splitlines()
    assert header == "'=1+2,'@SUM(A1),plain"
    assert row == "'=1+1,3,'-x"


# -- round 4: no traceback, whatever the output or the workspace's name -----------------------------------------------


def test_a_report_or_export_where_no_file_can_be_made_is_refused_in_words(trained: Trained, capsys) -> None:
    proc_version = Path("/proc/version").read_text()
    assert cli_main("report", "--out", "/proc/version", workspace=trained.path) == 2
    (message,) = error_lines(capsys.readouterr().err)
    assert message.startswith("error: Could not write the report to /proc/version: no file can be made in /proc (")
    assert cli_main("export", "--out", "/proc/prisma-export", workspace=trained.path) == 2
    (message,) = error_lines(capsys.readouterr().err)
    assert message.startswith("error: Could not write the export to /proc/prisma-export: no file can be made in /proc")
    assert Path("/proc/version").read_text() == proc_version


def test_a_report_never_replaces_a_pipe_or_a_device(trained: Trained, tmp_path: Path, capsys) -> None:
    pipe = tmp_path / "report.html"
    os.mkfifo(pipe)
    assert cli_main("report", "--out", str(pipe), workspace=trained.path) == 2
    (message,) = error_lines(capsys.readouterr().err)
    assert message == f"error: {pipe} is not a file (a device or a pipe); name a file to write the report to."
    assert stat.S_ISFIFO(pipe.stat().st_mode)  # still the pipe


def test_a_workspace_whose_name_holds_a_line_break_is_refused_in_words(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "work\nspace"
    for command in (["list"], ["repair"], ["ingest", str(tmp_path / "notes.csv")]):
        assert cli_main(*command, workspace=folder) == 2
        (message,) = error_lines(capsys.readouterr().err)
        assert "holds a line break or another control character" in message
    assert not folder.exists()


def test_a_report_of_a_run_whose_every_theme_is_hidden_says_so(workspace: Workspace, tmp_path: Path, capsys) -> None:
    run = pipeline.load_run(workspace)
    assert len(set(workspace.metadata(run.record.dataset_id)["label"])) == 5  # groups to compare
    for theme in run.theme_info["theme_id"]:
        assert cli_main("edit", "--action", "hide", "--level", "theme", "--id", str(theme), workspace=workspace) == 0
    assert cli_main("report", "--out", str(tmp_path / "report.html"), "--column", "label", workspace=workspace) == 0
    page = (tmp_path / "report.html").read_text()
    assert "Every theme of this run is hidden, so the groups of label have no themes to be compared on" in page
    assert cli_main("export", "--out", str(tmp_path / "export"), workspace=workspace) == 0
    assert json.loads((tmp_path / "export" / "themes.json").read_text()) == []
