"""Benchmark 6: BBC from file to labelled features and families with the CLI `run`, cold and warm.

    .venv/bin/python -m bench.end_to_end [--quick]

`python -m prisma_core run bbc_news.parquet --text-column text --id-column id --workspace DIR` in a fresh process,
twice on the same fresh workspace: cold (nothing cached), then warm (the second run ingests the file as a new
dataset and finds every embedding in the cache). Wall time of each process, and the seconds per stage that the
CLI prints (embedding, SAE training, analysis and keyword labels, families); the rest is process start, model
loading, ingest and storage.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from bench import common

NAME = "end_to_end"
TITLE = "6. End to end: the CLI `run` on BBC, cold and warm"
COMMAND = common.command(NAME)
QUICK_DOCS = 60
QUICK_FLAGS = ["--expansion-factor", "1", "--epochs", "5"]
"""The quick run shrinks the SAE (384 features, 5 epochs) so that it takes seconds."""
TARGET_COLD_SECONDS = 90.0
TARGET_WARM_SECONDS = 20.0
_EMBED_SECONDS = re.compile(r"^embedded .*?([\d.]+) s(?:,|$)", re.MULTILINE)
_STAGE_SECONDS = re.compile(r"^\s*seconds: (.+)$", re.MULTILINE)


def run(quick: bool = False) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="prisma-bench-e2e-") as folder:
        source = common.bbc_path()
        if quick:
            source = Path(folder) / "bbc_subset.parquet"
            pd.read_parquet(common.bbc_path()).head(QUICK_DOCS).to_parquet(source)
        workspace = Path(folder) / "workspace"
        flags = QUICK_FLAGS if quick else []
        cold = _cli_run(source, workspace, flags)
        warm = _cli_run(source, workspace, flags)
    return {
        "device": common.device_report(),
        "quick": quick,
        "documents": len(pd.read_parquet(common.bbc_path(), columns=["id"])) if not quick else QUICK_DOCS,
        "command": " ".join(
            ["python -m prisma_core run bbc_news.parquet --text-column text --id-column id --workspace DIR", *flags]
        ),
        "cold": cold,
        "warm": warm,
        "speedup": cold["seconds"] / warm["seconds"],
    }


def _cli_run(source: Path, workspace: Path, flags: list[str]) -> dict[str, Any]:
    command = [sys.executable, "-m", "prisma_core", "run", str(source), "--text-column", "text", "--id-column", "id"]
    command += ["--workspace", str(workspace), *flags]
    env = os.environ | {"PYTHONPATH": str(common.REPO), "HF_HUB_OFFLINE": "1"}
    seconds, finished = common.timed(
        lambda: subprocess.run(command, cwd=common.REPO, env=env, capture_output=True, text=True, check=False)
    )
    if finished.returncode != 0:
        raise RuntimeError(f"the CLI run failed ({finished.returncode}): {finished.stderr[-2000:]}")
    return {"seconds": seconds, "stages": stage_seconds(finished.stdout), "stdout": finished.stdout}


def stage_seconds(stdout: str) -> dict[str, float]:
    """Seconds per stage from the CLI's output: `embedded ... 12.3 s` and `seconds: train 4.5, analyse 1.2, ...`."""
    stages = {}
    embedded = _EMBED_SECONDS.search(stdout)
    if embedded:
        stages["embed"] = float(embedded.group(1))
    listed = _STAGE_SECONDS.search(stdout)
    if listed:
        for item in listed.group(1).split(","):
            name, value = item.strip().rsplit(" ", 1)
            stages[name] = float(value)
    return stages


def markdown(result: dict[str, Any]) -> str:
    stages = list(dict.fromkeys([*result["cold"]["stages"], *result["warm"]["stages"]]))
    rows = []
    for name in ("cold", "warm"):
        run_ = result[name]
        other = run_["seconds"] - sum(run_["stages"].values())
        rows.append([name, run_["seconds"], *[run_["stages"].get(stage, "-") for stage in stages], other])
    table = common.markdown_table(
        ["run", "total s", *[f"{stage} s" for stage in stages], "start-up, ingest, store s"], rows
    )
    cold = common.verdict(result["cold"]["seconds"], TARGET_COLD_SECONDS, higher_is_better=False)
    warm = common.verdict(result["warm"]["seconds"], TARGET_WARM_SECONDS, higher_is_better=False)
    return f"""`{result["command"]}` over {result["documents"]:,} articles, each run a fresh process:

{table}

- **Cold {result["cold"]["seconds"]:.1f} s** (target < {TARGET_COLD_SECONDS:.0f} s: **{cold}**);
  **warm {result["warm"]["seconds"]:.1f} s** (target < {TARGET_WARM_SECONDS:.0f} s: **{warm}**);
  warm is {result["speedup"]:.1f}x faster."""


def main() -> None:
    common.main(__doc__, NAME, run, markdown)


if __name__ == "__main__":
    main()
