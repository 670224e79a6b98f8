"""14. Report: the one-file HTML report of a 100,000-document run, its size and the time to write it.

    .venv/bin/python -m bench.report [--quick] [--docs N] [--embed-sample N]

The run: `bench.scale`'s corpus of real sentences (each document 4 to 16 sentences of one label of the shared
corpora, the label kept as the `label` column), ingested, embedded (`--embed-sample` documents for real, every
other vector resampled from them: the document vectors are synthetic, the texts real) and trained with a small SAE
(768 features, one training of one epoch: the report's cost depends on the number of documents, themes and groups,
not on the SAE's quality), each stage in its own process. Then, in fresh processes:
1. `python -m prisma_core report --column label` at the theme level (the default): wall time of the whole command
   (Python's imports, reading the run, drawing the map, the statistics, writing the file), the file's size;
2. the same at the feature level (every feature tested in every group);
3. where the time goes: reading the run, gathering (mostly the map), each section (`report.sections.SECTIONS`).
Each runs on one thread: its CPU time is the work it does whatever else shares the machine (see ONE_THREAD).
Targets (issue 27): <= 20 MB and <= 60 s for 100,000 documents.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import common, scale

NAME = "report"
TITLE = "14. Report: one HTML file for 100,000 documents, size and time to write"
DOCS = 100_000
EMBED_SAMPLE = 500
QUICK_DOCS = 1_500
QUICK_EMBED_SAMPLE = 100
SAE_FLAGS = ("n_features=768", "n_trainings=1", "epochs=1")
ONE_THREAD = os.environ | {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
"""The report command runs on one thread: its CPU time is then the work it does, whatever else the machine runs
(threads spinning while they wait for a busy core inflate it otherwise), and an idle machine of two cores takes
at most about that long."""
TARGET_MB = 20.0
TARGET_SECONDS = 60.0


def run(quick: bool = False, n_docs: int | None = None, embed_sample: int | None = None) -> dict[str, Any]:
    n_docs = n_docs or (QUICK_DOCS if quick else DOCS)
    embed_sample = min(n_docs, embed_sample or (QUICK_EMBED_SAMPLE if quick else EMBED_SAMPLE))
    with tempfile.TemporaryDirectory(prefix="prisma-bench-report-") as folder:
        built = scale.build(Path(folder), n_docs, embed_sample, sae_flags=SAE_FLAGS)
        workspace = Path(folder) / "workspace"
        reports = {level: _cli_report(workspace, Path(folder), level) for level in ("theme", "feature")}
        parts = _worker(workspace)
    run_stage = built["stages"]["run"]
    return {
        "device": common.device_report(),
        "quick": quick,
        "documents": n_docs,
        "embed_sample": embed_sample,
        "n_features": run_stage["sae"]["n_latents"],
        "n_themes": run_stage["n_themes"],
        "n_families": run_stage["n_families"],
        "run_seconds": run_stage["wall_seconds"],
        "reports": reports,
        "parts": parts,
    }


def _cli_report(workspace: Path, folder: Path, level: str) -> dict[str, Any]:
    """The command line's `report`, timed from the process's start to its end."""
    out = folder / f"report_{level}.html"
    command = [sys.executable, "-m", "prisma_core", "report", "--workspace", str(workspace), "--out", str(out)]
    command += ["--column", "label", "--level", level]
    before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    done = subprocess.run(command, cwd=common.REPO, capture_output=True, text=True, check=False, env=ONE_THREAD)
    seconds, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise RuntimeError(f"report failed:\n{done.stderr[-3000:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return {"seconds": seconds, "cpu_seconds": cpu, "mb": out.stat().st_size / 2**20}


def _worker(workspace: Path) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.report", "--worker", str(workspace)]
    done = subprocess.run(command, cwd=common.REPO, capture_output=True, text=True, check=False, env=ONE_THREAD)
    if done.returncode:
        raise RuntimeError(f"report worker failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def parts(workspace_path: Path) -> dict[str, Any]:
    """CPU seconds of each part of a theme-level report (in this process, on one thread): reading the run,
    gathering its contents (the map of the documents above all), then each section."""
    from prisma_core.pipeline.report.config import ReportConfig
    from prisma_core.pipeline.report.contents import gather
    from prisma_core.pipeline.report.sections import SECTIONS
    from prisma_core.reading.runs import load_run
    from prisma_core.store import Workspace

    workspace = Workspace(workspace_path)
    seconds: dict[str, float] = {}
    seconds["read the run"], run = _cpu_timed(lambda: load_run(workspace))
    seconds["gather (the map)"], contents = _cpu_timed(lambda: gather(workspace, run, ReportConfig(column="label")))
    for section in SECTIONS:
        seconds[f"section: {section.__name__}"], _ = _cpu_timed(lambda section=section: section(contents))
    n_groups = int(contents.groups.nunique()) if contents.groups is not None else 0
    return {"seconds": seconds, "n_groups": n_groups, "map_points": len(contents.map_points)}


def _cpu_timed(function: Callable[[], Any]) -> tuple[float, Any]:
    """(CPU seconds of this process, the result)."""
    started = time.process_time()
    value = function()
    return time.process_time() - started, value


def markdown(result: dict[str, Any]) -> str:
    theme, feature = result["reports"]["theme"], result["reports"]["feature"]
    rows = [
        ["themes (default)", result["n_themes"], theme["seconds"], theme["cpu_seconds"], theme["mb"]],
        ["features", result["n_features"], feature["seconds"], feature["cpu_seconds"], feature["mb"]],
    ]
    header = ["level compared", "concepts", "wall seconds", "CPU seconds (one thread)", "MB"]
    table = common.markdown_table(header, rows)
    part_rows = [[part, seconds] for part, seconds in result["parts"]["seconds"].items()]
    parts_table = common.markdown_table(["part (theme level, one thread)", "CPU seconds"], part_rows)
    worst_mb, worst_s = max(theme["mb"], feature["mb"]), theme["cpu_seconds"]
    smaller = "" if result["documents"] >= DOCS else " (a smaller run)"
    size_verdict = common.verdict(worst_mb, TARGET_MB, higher_is_better=False)
    time_verdict = common.verdict(worst_s, TARGET_SECONDS, higher_is_better=False)
    return f"""{result["documents"]:,} documents (real sentences; {result["embed_sample"]:,} embedded for real, the
other vectors resampled), SAE of {result["n_features"]:,} features (one training of one epoch), {result["n_themes"]}
themes, {result["n_families"]:,} families; the `label` column compared ({result["parts"]["n_groups"]} groups after
pooling), the map drawn from {result["parts"]["map_points"]:,} documents.
`python -m prisma_core report --column label [--level feature]`, each in a fresh process:

{table}

{parts_table}

- Largest file: **{worst_mb:.1f} MB** (target <= {TARGET_MB:.0f} MB): **{size_verdict}**{smaller}.
- The default report (themes): **{worst_s:.0f} s** of CPU on one thread (target <= {TARGET_SECONDS:.0f} s):
  **{time_verdict}**{smaller}; wall times above were taken on the shared machine."""


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        print(json.dumps(parts(Path(sys.argv[2])), default=float))
        return
    arguments = common.parser(__doc__.splitlines()[0])
    arguments.add_argument("--docs", type=int, help=f"documents (default {DOCS:,}; --quick {QUICK_DOCS:,})")
    arguments.add_argument("--embed-sample", type=int, help="documents embedded for real")
    args = arguments.parse_args()
    common.publish(NAME, run(args.quick, args.docs, args.embed_sample), args, markdown)


if __name__ == "__main__":
    main()
