"""What is stored survives a full disk, damaged tables and killed writers, is cleaned up once a day, and every
new session sees what another process stored (rounds 2 and 3).
"""

import dataclasses
import json
import os
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from app_helpers import new_app, open_page, texts
from reliability_helpers import (
    SMALL_SAE,
    Running,
    Trained,
    cli_main,
    error_lines,
    family_flags,
    run_cli_with_file_limit,
    sae_flags,
    snapshot,
    two_family_settings,
)

from prisma_core import cli, pipeline
from prisma_core.families import FamilyConfig, find_families
from prisma_core.ingest import IngestConfig
from prisma_core.store import WORKSPACE_ENV, Workspace
from ui.themes import ALL_THEMES

# -- the app sees what the command line changed -----------------------------------------------------------------------


def families_caption(at) -> str:
    """The count of every family of the run (the page opens on one theme's families)."""
    at.selectbox(key="family_theme").set_value(ALL_THEMES).run()
    return next(text for text in texts(at.caption) if " families over " in text)


def test_new_sessions_show_families_rebuilt_from_the_command_line(trained: Trained, monkeypatch) -> None:
    monkeypatch.setenv(WORKSPACE_ENV, str(trained.path))
    one, other = two_family_settings(trained.codes)
    counts = [len(find_families(trained.codes, FamilyConfig(**settings))) for settings in (one, other)]
    assert counts[0] != counts[1]
    assert cli_main("families", *family_flags(one), workspace=trained.path) == 0
    first = open_page(new_app(trained.dataset_id, trained.run_id), "families")
    assert families_caption(first).startswith(f"{counts[0]} families over")

    assert cli_main("families", *family_flags(other), workspace=trained.path) == 0

    second = open_page(new_app(trained.dataset_id, trained.run_id), "families")
    assert not second.exception
    assert families_caption(second).startswith(f"{counts[1]} families over")


# -- a full disk during the weights write -----------------------------------------------------------------------------


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


# -- disk space is reclaimed ------------------------------------------------------------------------------------------


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


# -- damaged tables ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_runs(small_run, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """The small run's workspace with a second run trained after it: (folder, first run, second run)."""

    workspace = small_run.copy(tmp_path_factory.mktemp("two_runs") / "workspace")
    second = pipeline.train_run(workspace, small_run.dataset_id, dataclasses.replace(SMALL_SAE, seed=1)).run_id
    return workspace.path, small_run.run.run_id, second


def damaged_copy(two_runs: tuple[Path, str, str], to: Path, table: str, how: str) -> Workspace:
    """A copy of `two_runs` whose table's newest data file is cut in half or removed."""
    shutil.copytree(two_runs[0], to)
    newest = max((to / "lancedb" / f"{table}.lance" / "data").glob("*.lance"), key=lambda path: path.stat().st_mtime)
    if how == "truncated":
        os.truncate(newest, newest.stat().st_size // 2)
    else:
        newest.unlink()
    return Workspace(to)


DAMAGED = [
    (table, how) for table in ("features", "activations", "documents", "datasets") for how in ("truncated", "removed")
]


@pytest.mark.parametrize(("table", "how"), DAMAGED)
def test_a_damaged_table_is_named_everything_else_still_lists_and_repair_restores_it(
    two_runs, tmp_path: Path, table: str, how: str, capsys
) -> None:
    workspace = damaged_copy(two_runs, tmp_path / "workspace", table, how)
    _, first, second = two_runs
    damage = f"The workspace's {table} table cannot be read"

    assert cli_main("list", workspace=workspace) == 0  # no traceback: what can be read is listed
    listed = capsys.readouterr().out
    assert first in listed and second in listed
    assert (damage in listed) == (table in ("features", "datasets"))  # list reads those two
    assert cli_main("export", "--run", first, "--out", str(tmp_path / "before"), workspace=workspace) == 2
    assert damage in error_lines(capsys.readouterr().err)[0]
    assert set(workspace.damaged_tables()) == {table}

    assert cli_main("repair", workspace=workspace) == 0
    repaired = capsys.readouterr().out
    assert repaired.startswith(f"{table}: damaged (") and "restored its version" in repaired
    assert workspace.damaged_tables() == {}
    assert cli_main("list", workspace=workspace) == 0 and "warning" not in capsys.readouterr().out
    if table in ("features", "activations"):  # the second run's rows were in the damaged file: the first run is whole
        assert f"run {second}: its {table} are lost" in repaired
        assert cli_main("export", "--run", first, "--out", str(tmp_path / "after"), workspace=workspace) == 0
    if table == "datasets":  # its record comes back from the ingest stage record
        assert "restored from its ingest stage record" in repaired
        assert cli_main("export", "--run", second, "--out", str(tmp_path / "after"), workspace=workspace) == 0


def test_a_run_hidden_by_a_lost_runs_table_version_is_named_kept_and_restored(two_runs, tmp_path: Path, capsys) -> None:
    shutil.copytree(two_runs[0], tmp_path / "workspace")
    workspace = Workspace(tmp_path / "workspace")
    _, first, second = two_runs
    config, metrics = workspace.run(second).config, workspace.run(second).metrics
    newest = min((workspace.path / "lancedb" / "sae_runs.lance" / "_versions").glob("*.manifest"))
    newest.unlink()  # LanceDB names versions so that the newest sorts first
    assert [run.run_id for run in workspace.runs()] == [first]

    assert cli_main("list", workspace=workspace) == 0
    assert f"warning: run {second} is stored but missing from the runs table" in capsys.readouterr().out
    dataset_id = workspace.run(first).dataset_id
    pipeline.train_run(workspace, dataset_id, dataclasses.replace(SMALL_SAE, seed=2))  # removes abandoned runs first
    assert (workspace.path / "runs" / second / "sae.safetensors").exists()  # a hidden run is not abandoned

    assert cli_main("repair", workspace=workspace) == 0
    assert f"run {second}: its record was missing from the runs table" in capsys.readouterr().out
    assert workspace.run(second).metrics == metrics and workspace.run(second).config == config
    assert cli_main("export", "--run", second, "--out", str(tmp_path / "export"), workspace=workspace) == 0


# -- a killed ingest ---------------------------------------------------------------------------------------------------


def test_the_documents_of_a_killed_ingest_are_removed_by_the_next_ingest_and_the_daily_clean_up(
    tmp_path: Path, corpora_dir: Path, small_run
) -> None:
    folder = tmp_path / "workspace"
    ingest = Running(
        "ingest", str(corpora_dir / "ag_news_test.parquet"), "--text-column", "text", "--id-column", "id",
        "--batch-rows", "50", workspace=folder,
    )  # fmt: skip
    data = folder / "lancedb" / "documents.lance" / "data"
    deadline = time.monotonic() + 120
    while not (data.is_dir() and len(list(data.glob("*.lance"))) >= 3):  # a few batches stored
        assert ingest.process.poll() is None and time.monotonic() < deadline, ingest.stderr.decode()
        time.sleep(0.05)
    ingest.kill()
    left = Workspace(folder).db.open_table("documents").count_rows()
    assert left >= 100 and Workspace(folder).datasets() == []
    shutil.copytree(folder, tmp_path / "copy")

    Workspace(folder).reclaim_space()  # the daily clean-up
    assert Workspace(folder).db.open_table("documents").count_rows() == 0
    workspace = Workspace(tmp_path / "copy")  # the next ingest
    _, report = pipeline.ingest(workspace, [small_run.corpus], config=IngestConfig(id_column="id"))
    assert workspace.db.open_table("documents").count_rows() == report.n_documents == 60
    assert not list((workspace.path / "ingests").iterdir())
