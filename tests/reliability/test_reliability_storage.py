"""What is stored survives a full disk, damaged tables and killed writers, is cleaned up once a day, and every
new session sees what another process stored (rounds 2 and 3).
"""

import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
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
    cli_worker,
    error_lines,
    family_flags,
    finished,
    run_cli_with_file_limit,
    sae_flags,
    snapshot,
    two_family_settings,
)
from start_line import start_line

from prisma_core import cli, pipeline
from prisma_core.concepts.families import FamilyConfig, find_families
from prisma_core.errors import LostRowsError
from prisma_core.ingest import IngestConfig
from prisma_core.store import WORKSPACE_ENV, Workspace
from prisma_core.store.repair import BUSY_REPAIRING
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
    assert damage in listed  # list counts what every dataset and run holds
    assert cli_main("export", "--run", first, "--out", str(tmp_path / "before"), workspace=workspace) == 2
    assert damage in error_lines(capsys.readouterr().err)[0]
    assert set(workspace.repairs.damaged_tables()) == {table}

    assert cli_main("repair", workspace=workspace) == 0
    repaired = capsys.readouterr().out
    assert repaired.startswith(f"{table}: damaged (") and "damaged data file(s) and kept its" in repaired
    assert workspace.repairs.damaged_tables() == {}
    assert cli_main("list", workspace=workspace) == 0
    assert ("warning" in capsys.readouterr().out) == (table != "datasets")  # the loss is named until deleted
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


# -- round 4: a repair removes only what is damaged, and what it removed stays named -----------------------------------


def data_files(workspace: Workspace, table: str) -> set[Path]:
    return set((workspace.path / "lancedb" / f"{table}.lance" / "data").glob("*.lance"))


def cut_in_half(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def test_a_repair_keeps_the_intact_documents_stored_after_the_damaged_ones(
    tmp_path: Path, ag_news: pd.DataFrame, capsys
) -> None:
    workspace = Workspace(tmp_path / "workspace")
    parts = [ag_news.iloc[20 * i : 20 * (i + 1)] for i in range(3)]
    dataset_ids, files = [], []
    for number, part in enumerate(parts):
        before = data_files(workspace, "documents")
        config = IngestConfig(text_column="text", id_column="id")
        dataset_ids.append(
            pipeline.ingest(workspace, [(f"part{number}.csv", part.to_csv(index=False).encode())], config=config)[0]
        )
        files.append(data_files(workspace, "documents") - before)
    (middle,) = files[1]
    cut_in_half(middle)

    assert cli_main("repair", workspace=workspace) == 0
    repaired = capsys.readouterr().out.splitlines()
    assert repaired[0].startswith("documents: damaged (")
    assert repaired[0].endswith("removed the 20 rows of its 1 damaged data file(s) and kept its 40 intact rows")
    assert repaired[1].startswith(f"dataset {dataset_ids[1]}: 0 of its 20 documents are left")
    assert len(repaired) == 2
    for dataset_id, part in zip(dataset_ids[::2], parts[::2], strict=True):  # the third dataset is whole
        assert workspace.documents(dataset_id)["text"].tolist() == part["text"].tolist()
    with pytest.raises(LostRowsError, match="0 of its 20 documents are left"):
        workspace.documents(dataset_ids[1])

    assert cli_main("list", workspace=workspace) == 0  # list agrees with the repair
    listed = capsys.readouterr().out
    assert f"{dataset_ids[1]}  'part1'  20 documents  (damaged: see the warning below)" in listed
    (warning,) = [line for line in listed.splitlines() if line.startswith("warning:")]
    assert warning.startswith(f"warning: dataset {dataset_ids[1]}: 0 of its 20 documents are left")
    assert listed.count("(damaged") == 1
    assert cli_main("repair", workspace=workspace) == 0  # a second repair still sees what is left
    assert capsys.readouterr().out.splitlines() == repaired[1:]
    assert f"python -m prisma_core delete --dataset {dataset_ids[1]}" in repaired[1]

    assert cli_main("delete", "--dataset", dataset_ids[1], workspace=workspace) == 0  # the command it names
    assert capsys.readouterr().out == f"deleted dataset {dataset_ids[1]} and its 0 run(s)\n"
    assert cli_main("repair", workspace=workspace) == 0
    assert capsys.readouterr().out.startswith("every table reads in full")
    assert [dataset.dataset_id for dataset in workspace.datasets()] == dataset_ids[::2]


def test_after_a_repair_a_run_whose_documents_were_lost_is_refused_in_words(
    workspace: Workspace, small_run, tmp_path: Path, capsys
) -> None:
    (newest,) = data_files(workspace, "documents")
    cut_in_half(newest)
    run_id, dataset_id = small_run.run.run_id, small_run.dataset_id
    assert cli_main("repair", workspace=workspace) == 0
    assert f"dataset {dataset_id}: 0 of its 60 documents are left" in capsys.readouterr().out
    commands = [
        ("export", "--run", run_id, "--out", str(tmp_path / "export")),
        ("report", "--run", run_id, "--out", str(tmp_path / "report.html")),
        ("themes", "--run", run_id),
        ("families", "--run", run_id),
    ]
    for command in commands:
        assert cli_main(*command, workspace=workspace) == 2, command
        (message,) = error_lines(capsys.readouterr().err)
        assert message.startswith(f"error: dataset {dataset_id}: 0 of its 60 documents are left"), command
    assert not (tmp_path / "export").exists() and not (tmp_path / "report.html").exists()
    rename = ("edit", "--action", "rename", "--level", "theme", "--id", "0", "--name", "Kept")
    assert cli_main(*rename, workspace=workspace) == 0  # an edit reads no document
    assert "theme 0 renamed “Kept”" in capsys.readouterr().out

    assert cli_main("delete", "--dataset", dataset_id, workspace=workspace) == 0
    assert cli_main("list", workspace=workspace) == 0
    assert capsys.readouterr().out == f"deleted dataset {dataset_id} and its 1 run(s)\n"  # and nothing is listed


def test_a_run_that_lost_its_features_is_refused_and_the_groups_it_lost_are_made_again(
    two_runs, tmp_path: Path, capsys
) -> None:
    _, first, second = two_runs
    shutil.copytree(two_runs[0], tmp_path / "five")
    five = Workspace(tmp_path / "five")
    for table in ("features", "interpretations", "themes", "subthemes", "families"):  # the second run's rows
        cut_in_half(max(data_files(five, table), key=lambda path: path.stat().st_mtime))
    assert cli_main("repair", workspace=five) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith(f"run {second}: its features are lost")
    for command in ("edit", "export", "themes"):
        out = ("--out", str(tmp_path / "export")) if command == "export" else ()
        assert cli_main(command, "--run", second, *out, workspace=five) == 2
        (message,) = error_lines(capsys.readouterr().err)
        assert message.startswith(f"error: run {second}: its features are lost")
        assert f"python -m prisma_core delete --run {second}" in message
    assert cli_main("export", "--run", first, "--out", str(tmp_path / "first"), workspace=five) == 0

    shutil.copytree(two_runs[0], tmp_path / "groups")
    groups = Workspace(tmp_path / "groups")
    n_features = len(groups.feature_stats.of(second))
    for table in ("interpretations", "themes", "subthemes", "families"):
        cut_in_half(max(data_files(groups, table), key=lambda path: path.stat().st_mtime))
    assert cli_main("repair", workspace=groups) == 0
    lost = capsys.readouterr().out.splitlines()[-3:]
    assert lost == [
        f"run {second}: the labels of {n_features} features are lost; they show as '(label lost)' until named again "
        f"(`python -m prisma_core label --run {second}` with a model, or on the Labels page)",
        f"run {second}: its themes and sub-themes are lost; `python -m prisma_core themes --run {second}` makes them "
        "again",
        f"run {second}: its families are lost; `python -m prisma_core families --run {second}` makes them again",
    ]
    assert set(pipeline.load_run(groups, second).features["label"]) == {"(label lost)"}
    assert cli_main("themes", "--run", second, workspace=groups) == 0
    assert cli_main("families", "--run", second, workspace=groups) == 0
    assert cli_main("repair", workspace=groups) == 0
    assert capsys.readouterr().out.splitlines()[-1] == lost[0]  # only the labels are still missing
    assert cli_main("export", "--run", second, "--out", str(tmp_path / "second"), workspace=groups) == 0


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


def test_the_marker_of_an_ingest_killed_before_it_stored_anything_is_cleared_by_the_next_ingest(
    tmp_path: Path, small_run
) -> None:
    workspace = Workspace(tmp_path / "workspace")
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    marker = workspace.path / "ingests" / "ds-20240101-000000-abcdef"
    marker.mkdir(parents=True)  # what an ingest killed before its first batch leaves: its folder, naming its process
    (marker / "owner.json").write_text(json.dumps({"host": socket.gethostname(), "pid": int(ended.stdout)}))
    live = workspace.path / "ingests" / "ds-20240101-000000-fedcba"
    live.mkdir()
    (live / "owner.json").write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid()}))

    pipeline.ingest(workspace, [small_run.corpus], config=IngestConfig(id_column="id"))

    assert sorted(path.name for path in (workspace.path / "ingests").iterdir()) == [live.name]  # a live one is kept


def test_a_command_on_a_mistyped_workspace_path_creates_nothing(tmp_path: Path, capsys) -> None:
    typo = tmp_path / "workspcae"
    for command in (["repair"], ["list"], ["export", "--out", str(tmp_path / "out")], ["train"]):
        assert cli_main(*command, workspace=typo) == 2
        (message,) = error_lines(capsys.readouterr().err)
        assert (
            message
            == f"error: There is no workspace at {typo}: check the path (`ingest` or `run` makes a new workspace)."
        )
    assert not typo.exists()


# -- round 4, this round's own probe: repairs killed, repairs at once --------------------------------------------------


def test_two_repairs_at_once_restore_a_lost_record_once(two_runs, tmp_path: Path) -> None:
    workspace = damaged_copy(two_runs, tmp_path / "workspace", "datasets", "truncated")  # its record is lost
    start = start_line(tmp_path / "start", 2)
    workers = [cli_worker(str(workspace.path), start, ["repair"]) for _ in range(2)]
    results = [finished(worker) for worker in workers]

    for status, _, stderr in results:
        assert "Traceback" not in stderr and status in (0, 2), stderr[-2000:]
        assert status == 0 or error_lines(stderr) == [f"error: {BUSY_REPAIRING}"]
    restored = [stdout for _, stdout, _ in results if "restored from its ingest stage record" in stdout]
    assert len(restored) == 1  # by one of them: the other found nothing left to do, or waited its turn
    assert Workspace(workspace.path).db.open_table("datasets").count_rows() == 1
    assert Workspace(workspace.path).repairs.damaged_tables() == {}


def test_a_repair_is_refused_while_another_runs_and_a_killed_one_does_not_block_the_next(
    two_runs, tmp_path: Path, capsys
) -> None:
    workspace = damaged_copy(two_runs, tmp_path / "workspace", "features", "removed")
    held, holding = threading.Event(), threading.Event()

    def another_repair() -> None:  # another session's repair, in a thread of its own
        other = Workspace(workspace.path)
        other.repairs._add_locks()
        with other.tables.holding("locks", "name = 'repair'", "holder", BUSY_REPAIRING):
            holding.set()
            held.wait(60)

    thread = threading.Thread(target=another_repair)
    thread.start()
    assert holding.wait(60)
    assert cli_main("repair", workspace=workspace) == 2
    assert error_lines(capsys.readouterr().err) == [f"error: {BUSY_REPAIRING}"]
    held.set()
    thread.join(60)
    assert set(workspace.repairs.damaged_tables()) == {"features"}  # nothing was done meanwhile

    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    killed = json.dumps({"host": socket.gethostname(), "pid": int(ended.stdout), "token": "x"})
    assert workspace.tables.swap("locks", "name = 'repair'", "holder", "", killed)  # a repair killed while it held it
    assert cli_main("repair", workspace=workspace) == 0
    assert capsys.readouterr().out.startswith("features: damaged (")
    assert workspace.repairs.damaged_tables() == {}
