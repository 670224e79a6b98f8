"""Benchmark 13: embedding on a Ray cluster with 1 and 2 workers, against this machine's own embedding.

    .venv/bin/python -m bench.ray_scaling [--quick] [--ray-address HOST:PORT]

The same BBC articles are embedded through `pipeline.embed_dataset` into a fresh workspace each time (so nothing
comes from the cache) on three paths: locally (no address), and on a Ray cluster with 1 and with 2 workers, in
interleaved rounds with the order rotating after one warm-up call per path (none with --quick, a smoke run). Without
--ray-address the benchmark starts a local head node with 2 CPUs (`ray start --head`, as the tests do) and stops it
at the end. Each timed call is a whole embedding as an analyst runs it: on Ray that includes starting the workers and
loading the model in each (a fixed cost that a large corpus pays once, measured each round by a call with one
document per worker). Reported: content tokens/s of each path's median call and after its fixed cost, the ratios
2 workers / 1 worker and Ray / local per round and of the medians, and the vectors' cosine to the local ones.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench import common
from prisma_core import pipeline
from prisma_core.embed import EmbedConfig
from prisma_core.pipeline import ray_embedding
from prisma_core.store import Workspace

NAME = "ray_scaling"
TITLE = "13. Ray: embedding on a cluster with 1 and 2 workers vs this machine"
LOCAL_CPUS = 2
PATHS = {"local": None, "ray, 1 worker": 1, "ray, 2 workers": 2}
"""Path name -> Ray workers (None: embedded on this machine)."""


@contextlib.contextmanager
def local_cluster(cpus: int = LOCAL_CPUS) -> Iterator[str]:
    """A Ray head node on this machine (its own temporary folder, `cpus` CPUs), yielding its address; its processes
    (one process group) are stopped afterwards."""
    folder = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths live under it
    command = [str(Path(sys.executable).with_name("ray")), "start", "--head", "--block", "--port=0"]
    command += [f"--num-cpus={cpus}", f"--temp-dir={folder}", "--include-dashboard=false", "--disable-usage-stats"]
    command += ["--object-store-memory=200000000"]
    head = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        yield _address(Path(folder) / "ray_current_cluster", head)
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):  # it has never stopped within 20 s here: killed after 3
            head.wait(timeout=3)
        with contextlib.suppress(ProcessLookupError):  # already gone
            os.killpg(head.pid, signal.SIGKILL)
        head.wait()
        subprocess.run(["rm", "-rf", folder], check=False)


def _address(written: Path, head: subprocess.Popen, timeout_s: float = 120) -> str:
    """The head node's address (on loopback), once it has written it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if head.poll() is not None:
            raise RuntimeError("ray start --head exited")
        if written.is_file() and written.read_text().strip():
            return "127.0.0.1:" + written.read_text().strip().rsplit(":", 1)[1]
        time.sleep(0.5)
    raise TimeoutError("the Ray head node did not start in time")


def _embed_fresh(documents: pd.DataFrame, config: EmbedConfig) -> tuple[float, pipeline.EmbedSummary, np.ndarray]:
    """(seconds, summary, vectors) of embedding `documents` into a new workspace: nothing comes from a cache."""
    with tempfile.TemporaryDirectory(prefix="bench_ray_") as folder:
        workspace = Workspace(folder)
        dataset_id = workspace.add_dataset("bbc", documents, [str(common.bbc_path())], {})
        seconds, summary = common.timed(lambda: pipeline.embed_dataset(workspace, dataset_id, config))
        return seconds, summary, workspace.vectors(dataset_id, summary.embedding_key)


def run(quick: bool = False, address: str = "") -> dict[str, Any]:
    texts = common.speed_texts(quick)
    documents = pd.DataFrame({"doc_id": [str(i) for i in range(len(texts))], "text": texts})
    started_here = not address
    with contextlib.ExitStack() as stack:
        address = address or stack.enter_context(local_cluster())
        cluster = stack.enter_context(ray_embedding.connected(address))  # one connection for every Ray call
        configs = {
            name: replace(EmbedConfig(), ray_address=address if workers else "", ray_workers=workers)
            for name, workers in PATHS.items()
        }
        if not quick:  # the quick run, a smoke run, times its first calls
            for config in configs.values():
                _embed_fresh(documents, config)  # warm-up: model conversion, caches, first worker start
        seconds: dict[str, list[float]] = {name: [] for name in configs}
        vectors: dict[str, np.ndarray] = {}
        starts: dict[str, list[float]] = {name: [] for name, workers in PATHS.items() if workers}
        for number in range(common.timed_rounds(quick)):
            for name in common.rotated(list(configs), number):
                elapsed, summary, vectors[name] = _embed_fresh(documents, configs[name])
                seconds[name].append(elapsed)
            for name in starts:  # one document per worker: the job's fixed cost (workers started, model loaded)
                starts[name].append(_embed_fresh(documents.head(PATHS[name]), configs[name])[0])
        resources = cluster.resources
    return {
        "device": common.device_report(),
        "quick": quick,
        "documents": len(texts),
        "content_tokens": summary.n_tokens,
        "space": summary.embedding_key,
        "cluster": {"started_here": started_here, "cpus": resources.get("CPU", 0)},
        "paths": {
            name: {
                "seconds": seconds[name],
                "tokens_per_s": summary.n_tokens / common.median(seconds[name]),
                "cosine_to_local_min": float(common.cosine_rows(vectors[name], vectors["local"]).min()),
                "start_seconds": starts.get(name, [0.0]),
                "tokens_per_s_after_start": _after_start(
                    summary.n_tokens, common.median(seconds[name]), common.median(starts.get(name, [0.0]))
                ),
            }
            for name in configs
        },
        "round_ratios_2_over_1": _ratios(seconds["ray, 1 worker"], seconds["ray, 2 workers"]),
        "round_ratios_2_over_local": _ratios(seconds["local"], seconds["ray, 2 workers"]),
    }


def _after_start(tokens: int, seconds: float, start_seconds: float) -> float:
    """Tokens/s once the job's fixed cost is paid (nan when the fixed cost took the whole call: too few documents)."""
    return tokens / (seconds - start_seconds) if seconds > start_seconds else float("nan")


def _ratios(baseline: list[float], faster: list[float]) -> list[float]:
    """Per round: how many times faster than the baseline (the baseline's seconds over this path's)."""
    return [base / path for base, path in zip(baseline, faster, strict=True)]


def markdown(result: dict[str, Any]) -> str:
    paths = result["paths"]
    local = paths["local"]["tokens_per_s"]
    rows = [
        [
            name,
            summary["tokens_per_s"],
            summary["tokens_per_s"] / local,
            common.median(summary["start_seconds"]),
            summary["tokens_per_s_after_start"],
            summary["cosine_to_local_min"],
        ]
        for name, summary in paths.items()
    ]
    header = ["path", "content tokens/s (median call)", "x local", "fixed cost, s", "tokens/s after it", "min cosine"]
    table = common.markdown_table(header, rows)
    two_over_one = paths["ray, 2 workers"]["tokens_per_s"] / paths["ray, 1 worker"]["tokens_per_s"]
    return f"""{result["documents"]} BBC articles ({result["content_tokens"]:,} content tokens) into
**{result["space"]}**, each call into a fresh workspace, median of {len(paths["local"]["seconds"])} interleaved
calls per path {"without" if result["quick"] else "after"} a warm-up; the cluster: {result["cluster"]["cpus"]:.0f} CPUs
({"a head node started on this machine" if result["cluster"]["started_here"] else "given by --ray-address"}).

{table}

The fixed cost is the median call with one document per worker (starting the workers, loading the model in each,
the job's set-up); "after it" divides the tokens by the median call minus that cost. The cosine is to the local
vectors, per document (minimum).

- **2 workers / 1 worker: {two_over_one:.2f}x** (per round:
  {", ".join(f"{r:.2f}" for r in result["round_ratios_2_over_1"])}); 2 workers / local per round:
  {", ".join(f"{r:.2f}" for r in result["round_ratios_2_over_local"])}."""


def main() -> None:
    arguments = common.parser(__doc__.splitlines()[0])
    arguments.add_argument("--ray-address", default="", help="an existing cluster (default: start a local one)")
    args = arguments.parse_args()
    common.publish(NAME, run(args.quick, args.ray_address), args, markdown)


if __name__ == "__main__":
    main()
