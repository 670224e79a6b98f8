"""Shared by the reliability tests: workspace snapshots, small real corpora (and a run trained on one), the CLI run
in this process, and CLI processes to kill or race."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
from cached_vectors import cache_vectors_from
from start_line import start_line

from prisma_core import cli, pipeline
from prisma_core.ingest import IngestConfig
from prisma_core.sae import SAEConfig
from prisma_core.store import Workspace

REPO = Path(__file__).resolve().parents[2]
SMALL_SAE = SAEConfig(n_features=32, k=4, epochs=3, batch_size=32)
"""Trains in about a second on 60 documents: the tests are about what is stored, not about quality."""

BY_ID = IngestConfig(text_column="text", id_column="id")
YEARS = [2001, "unknown", 2003, None]
"""A spreadsheet-style metadata column: numbers, text and blanks in one column."""


def sae_flags(config: SAEConfig = SMALL_SAE) -> list[str]:
    """The CLI flags that train with `config`'s main settings."""
    return [
        *("--n-features", str(config.n_features), "--k", str(config.k)),
        *("--epochs", str(config.epochs), "--batch-size", str(config.batch_size)),
    ]


def bbc_subset(bbc: pd.DataFrame, per_label: int, skip: int = 0) -> pd.DataFrame:
    """per_label real articles of each of the five BBC labels, starting at the skip-th of each label.

    BBC News repeats a few articles word for word; they are left out so that subsets share no text.
    """
    unique = bbc.drop_duplicates("text")
    return unique.groupby("label").nth(list(range(skip, skip + per_label))).reset_index(drop=True)


def write_parquet(frame: pd.DataFrame, path: Path) -> Path:
    frame.to_parquet(path, index=False)
    return path


def snapshot(workspace: Workspace, versions: bool = True) -> dict[str, tuple[int, ...]]:
    """Every table's rows (and version: a new version means something was committed) and the run folders.

    Equal snapshots with versions mean nothing was written; without, that nothing was kept.
    """
    tables = {}
    for name in workspace.db.list_tables().tables:
        table = workspace.db.open_table(name)
        tables[name] = (table.count_rows(), table.version) if versions else (table.count_rows(),)
    runs_dir = workspace.path / "runs"
    folders = sorted(path.name for path in runs_dir.iterdir()) if runs_dir.is_dir() else []
    return tables | {"run folders": (len(folders), hash(tuple(folders)))}


class Trained:
    """60 BBC articles with a `year` column mixing numbers and text, embedded and trained once. They are the
    session's small run's articles, so their vectors come from its workspace: none is embedded again."""

    def __init__(self, root: Path, bbc: pd.DataFrame, vectors_from: Workspace) -> None:
        self.path = root / "workspace"
        workspace = Workspace(self.path)
        frame = bbc_subset(bbc, 12)[["id", "text"]].assign(year=[YEARS[i % 4] for i in range(60)])
        records = "\n".join(json.dumps(record) for record in frame.to_dict(orient="records"))
        self.dataset_id, _ = pipeline.ingest(workspace, [("news.jsonl", records.encode())], config=BY_ID)
        cache_vectors_from(vectors_from, workspace, self.dataset_id)
        assert pipeline.embed_dataset(workspace, self.dataset_id).n_computed == 0
        self.run_id = pipeline.train_run(workspace, self.dataset_id, SMALL_SAE).run_id
        self.codes = pipeline.load_run(workspace, self.run_id).codes


def cli_main(*args: str, workspace: Path | Workspace) -> int:
    """The CLI run in this process on `workspace`, with its exit status."""
    folder = workspace.path if isinstance(workspace, Workspace) else workspace
    return cli.main([*args, "--workspace", str(folder)])


def error_lines(stderr: str) -> list[str]:
    """The CLI's error messages, without the progress bars around them."""
    return re.findall(r"error: [^\n]*", stderr)


def cli_command(*args: str, workspace: Path) -> list[str]:
    return [sys.executable, "-m", "prisma_core", *args, "--workspace", str(workspace)]


def run_cli(*args: str, workspace: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        cli_command(*args, workspace=workspace), cwd=REPO, capture_output=True, text=True, timeout=timeout
    )


def run_cli_with_file_limit(*args: str, workspace: Path, limit_kb: int) -> subprocess.CompletedProcess:
    """The CLI allowed to write at most `limit_kb` KB to any file: bigger writes fail with EFBIG ("File too large"),
    as on a full disk. SIGXFSZ is ignored so the write fails instead of the process being killed."""
    limited = f"trap '' XFSZ; ulimit -f {limit_kb}; exec \"$@\""
    return subprocess.run(
        ["bash", "-c", limited, "bash", *cli_command(*args, workspace=workspace)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )


def stop_process(process: subprocess.Popen, timeout: float) -> None:
    """Asks a server process to stop, and kills it if it has not within `timeout` seconds."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout)


class Running:
    """A CLI process whose stderr (where the progress bars go) is collected as it arrives."""

    def __init__(self, *args: str, workspace: Path) -> None:
        self.process = subprocess.Popen(
            cli_command(*args, workspace=workspace),
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.stderr = b""
        self._reader = threading.Thread(target=self._collect, daemon=True)
        self._reader.start()

    def _collect(self) -> None:
        while chunk := os.read(self.process.stderr.fileno(), 4096):
            self.stderr += chunk

    def wait_for(self, needle: bytes, timeout: float = 300) -> None:
        """Block until the process has written `needle` to stderr; fail if it ends or the timeout passes first."""
        deadline = time.monotonic() + timeout
        while needle not in self.stderr:
            assert self.process.poll() is None, f"ended before {needle!r}: {self.stderr.decode(errors='replace')}"
            assert time.monotonic() < deadline, f"no {needle!r} within {timeout} s"
            time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL: no cleanup code runs, exactly like a power cut or an out-of-memory kill."""
        self.process.send_signal(signal.SIGKILL)
        assert self.process.wait(timeout=30) == -signal.SIGKILL
        self._reader.join(timeout=5)


def cli_worker(where: str, start: str, *commands: list[str]) -> subprocess.Popen:
    """tests/helpers/reliability_cli_worker.py: CLI commands in another process once the start line is reached."""
    return subprocess.Popen(
        [
            sys.executable,
            str(REPO / "tests" / "helpers" / "reliability_cli_worker.py"),
            where,
            start,
            json.dumps(commands),
        ],
        cwd=REPO,
        env=os.environ | {"PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def add_during_an_addition(where: str, dataset_id: str, first: Path, second: Path, folder: Path) -> list[tuple]:
    """`add FIRST` to a dataset that has a run, then `add SECOND` started the moment the first addition's documents
    are stored, while it still embeds and places them; (status, stdout, stderr) of both."""
    line = start_line(folder / "second", 2)  # the second process, and this test once the first has stored
    later = cli_worker(where, line, ["add", str(second), "--dataset", dataset_id])
    while not list((folder / "second").glob("*.ready")):
        assert later.poll() is None, later.communicate()
        time.sleep(0.05)
    n_before = Workspace(where).dataset(dataset_id).n_documents
    earlier = cli_worker(where, start_line(folder / "first", 1), ["add", str(first), "--dataset", dataset_id])
    while Workspace(where).dataset(dataset_id).n_documents == n_before:
        assert earlier.poll() is None, earlier.communicate()
        time.sleep(0.05)
    (folder / "second" / "test.ready").touch()
    return [finished(worker) for worker in (earlier, later)]


def finished(worker: subprocess.Popen, timeout: float = 600) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of a worker, once it has ended."""
    stdout, stderr = worker.communicate(timeout=timeout)
    return worker.returncode, stdout, stderr


FAMILY_SETTINGS = (
    {"iterations": 1},
    {"iterations": 3},
    {"iterations": 3, "min_family_size": 2},
    {"iterations": 3, "min_family_size": 2, "min_shared": 1},
)
"""Family settings, from the strictest: the first two that give a run different families serve the tests that need
two rebuilds with different results."""


def two_family_settings(codes) -> tuple[dict, dict]:
    """Two of FAMILY_SETTINGS whose families of `codes` differ in number."""
    from prisma_core.concepts.families import FamilyConfig, find_families

    counted = [(settings, len(find_families(codes, FamilyConfig(**settings)))) for settings in FAMILY_SETTINGS]
    first = counted[0]
    second = next(((s, n) for s, n in counted[1:] if n != first[1]), None)
    assert second is not None, f"every family setting gives {first[1]} families"
    return first[0], second[0]


def family_flags(settings: dict) -> list[str]:
    """The `families` command's flags for these settings."""
    return [flag for name, value in settings.items() for flag in (f"--{name.replace('_', '-')}", str(value))]
