"""Shared parts of the benchmarks: paths, the BBC corpus and its cached vectors, the device report, timing and the
JSON result files that `bench.run_all` renders into BENCHMARKS.md.

Every benchmark runs Prisma and its baseline interleaved in one run and reports ratios: this machine is shared,
so absolute times drift while ratios measured side by side stay meaningful.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
RESULTS_DIR = REPO / "bench" / "results"
CORPORA_DIR = Path(os.environ.get("PRISMA_CORPORA", REPO.parent / "shared" / "corpora"))
BBC_FILE = "bbc_news.parquet"
SPEED_DOCS = 300
"""BBC articles the embedding-speed comparisons time (sections 1, 2, 9 and 13): the same articles in each, so their
tokens per second compare across sections."""
QUICK_SPEED_DOCS = 24
"""The same in quick mode (the benchmarks' own tests)."""
EMBED_BATCH_SIZE = 64
"""Chunks per forward pass on every side of sections 1 and 2 (the app's default of 16 runs at the same speed on a
CPU: section 8)."""


def bbc_path() -> Path:
    path = CORPORA_DIR / BBC_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: the benchmarks read ../shared/corpora (or $PRISMA_CORPORA)")
    return path


def bbc_texts(n_docs: int | None = None) -> list[str]:
    """BBC article texts in file order; the first n_docs when given."""
    texts = pd.read_parquet(bbc_path(), columns=["text"])["text"].tolist()
    return texts if n_docs is None else texts[:n_docs]


def shuffled_documents(path: Path, seed: int = 0) -> pd.DataFrame:
    """A corpus's documents in a seeded random order, each text once (a repeated text is one vector to the embedding
    cache). The quick modes of the quality, bounded-quality and placement benchmarks take the first ones, so they draw
    the same documents and the placement benchmark finds the quality benchmark's vectors in its cache."""
    return pd.read_parquet(path).drop_duplicates("text").sample(frac=1.0, random_state=seed)


def speed_texts(quick: bool) -> list[str]:
    """The articles an embedding-speed comparison times."""
    return bbc_texts(QUICK_SPEED_DOCS if quick else SPEED_DOCS)


def bbc_vectors(n_docs: int | None, cache_dir: Path) -> np.ndarray:
    """Prisma's default embeddings of the first n_docs BBC articles (all when None), [n_docs, 384] float32.

    Computed once through the pipeline into a workspace under cache_dir; later calls read the cache.
    """
    from prisma_core import pipeline
    from prisma_core.embed import EmbedConfig, model_key
    from prisma_core.store import Workspace

    workspace = Workspace(cache_dir / "bbc_vectors")
    name = f"bbc-{n_docs or 'all'}"
    dataset = next((d for d in workspace.datasets() if d.name == name), None)
    if dataset is None:
        frame = pd.read_parquet(bbc_path())
        frame = frame if n_docs is None else frame.head(n_docs)
        documents = pd.DataFrame({"doc_id": frame["id"].astype(str), "text": frame["text"]})
        dataset_id = workspace.add_dataset(name, documents, [str(bbc_path())], {})
    else:
        dataset_id = dataset.dataset_id
    pipeline.embed_dataset(workspace, dataset_id)
    return workspace.vectors(dataset_id, model_key(EmbedConfig()))


def cache_corpus_vectors(workspace: Any, dataset_id: str, corpus: str) -> Any:
    """Puts the shared corpus's vectors (CORPORA_DIR/<corpus>.vectors.parquet, computed by Prisma) of the dataset's
    texts into the workspace's embedding cache, by text hash (the product's own cache, as
    tests/helpers/cached_vectors.py fills it), and returns the embedding settings of their vector space: embedding the
    dataset with them computes nothing."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from prisma_core.embed import EmbedConfig, model_key

    table = pq.read_table(CORPORA_DIR / f"{corpus}.vectors.parquet", columns=["text_hash", "vector"])
    key = table.schema.metadata[b"model_key"].decode()
    backend, precision = key.split("|")[1].split("-")
    config = EmbedConfig(backend=backend, precision=precision)
    assert model_key(config) == key, (model_key(config), key)
    hashes = workspace.documents(dataset_id, ["text_hash"])["text_hash"].unique()
    found = table.filter(pc.is_in(table["text_hash"], value_set=pa.array(list(hashes), pa.string())))
    vectors = np.stack(found["vector"].to_numpy(zero_copy_only=False)).astype(np.float32)
    workspace.cache_text_vectors(key, found["text_hash"].to_pylist(), vectors)
    return config


def resample(vectors: np.ndarray, n: int, noise: float = 0.25, seed: int = 0) -> np.ndarray:
    """n synthetic vectors on the data's manifold: random convex mixtures of two real vectors plus Gaussian noise of
    `noise` times the per-dimension spread, [n, d] float32. No two rows repeat, unlike plain resampling."""
    rng = np.random.default_rng(seed)
    first = vectors[rng.integers(0, len(vectors), n)]
    second = vectors[rng.integers(0, len(vectors), n)]
    weight = rng.uniform(0.5, 1.0, (n, 1)).astype(np.float32)
    spread = vectors.std(axis=0, keepdims=True)
    mixed = weight * first + (1 - weight) * second
    return (mixed + noise * spread * rng.standard_normal(mixed.shape, dtype=np.float32)).astype(np.float32)


def split_rows(n: int, holdout_fraction: float = 0.1, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random (train rows, held-out rows), each ascending."""
    order = np.random.default_rng(seed).permutation(n)
    n_holdout = max(1, round(n * holdout_fraction))
    return np.sort(order[n_holdout:]), np.sort(order[:n_holdout])


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_report() -> dict[str, Any]:
    """What the numbers were measured on, as the benchmarks report it.

    torch is imported here, not at the top: memory-measuring workers import this module and must stay light.
    """
    import torch

    from prisma_core.embed import EmbedConfig, cpu_has_native_bf16, model_key, resolve_device

    device = resolve_device("auto")
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "native_bf16": cpu_has_native_bf16(),
        "device": device,
        "embedding_space_auto": model_key(EmbedConfig()),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "load_average_1m": os.getloadavg()[0],
    }


def timed(function: Callable[[], Any]) -> tuple[float, Any]:
    """(wall seconds, return value) of one call."""
    started = time.perf_counter()
    value = function()
    return time.perf_counter() - started, value


def timed_rounds(quick: bool, full: int = 3) -> int:
    """Timed rounds of each side of a speed comparison: `full`, or one in quick mode (the benchmarks' own tests)."""
    return 1 if quick else full


def rotated(names: list[str], number: int) -> list[str]:
    """The order of round `number`: each side goes first in turn, so none always runs on a warmer machine."""
    shift = number % len(names)
    return names[shift:] + names[:shift]


def interleaved(paths: dict[str, Callable[[], Any]], rounds: int) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Each path called once to warm up (kernel selection and first-call costs), then once a round with the order
    rotating: (wall seconds of every timed call, per path; each path's last return value)."""
    for function in paths.values():
        function()
    seconds: dict[str, list[float]] = {name: [] for name in paths}
    values: dict[str, Any] = {}
    for number in range(rounds):
        for name in rotated(list(paths), number):
            elapsed, values[name] = timed(paths[name])
            seconds[name].append(elapsed)
    return seconds, values


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MB.

    Linux's VmHWM belongs to the process's own address space; getrusage's ru_maxrss (the fallback) survives exec
    and so can report the peak of the parent that started this process.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two [n, d] arrays -> [n]."""
    dot = np.einsum("ij,ij->i", a.astype(np.float64), b.astype(np.float64))
    return dot / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)).clip(min=1e-12)


def verdict(measured: float, target: float, higher_is_better: bool = True) -> str:
    met = measured >= target if higher_is_better else measured < target
    return "met" if met else "missed"


def parser(description: str) -> argparse.ArgumentParser:
    arguments = argparse.ArgumentParser(description=description)
    arguments.add_argument("--quick", action="store_true", help="small data, a few seconds: a smoke run")
    arguments.add_argument("--out", type=Path, default=RESULTS_DIR, help="folder for the JSON result")
    arguments.add_argument(
        "--cache", type=Path, default=RESULTS_DIR / "cache", help="folder for cached BBC vectors (reused across runs)"
    )
    return arguments


def write_result(name: str, result: dict[str, Any], out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps(result, indent=2, default=float))
    return path


def publish(name: str, result: dict[str, Any], args: argparse.Namespace, render: Callable[[dict], str]) -> None:
    """Command-line ending shared by every benchmark: save the JSON result and print its markdown."""
    write_result(name + ("_quick" if args.quick else ""), result, args.out)
    print(render(result))


def main(doc: str, name: str, run: Callable[[bool], dict[str, Any]], render: Callable[[dict], str]) -> None:
    """The command line of a benchmark whose only setting is --quick: run it, save its result, print its markdown
    (doc: the module's docstring, whose first line describes it)."""
    args = parser(doc.splitlines()[0]).parse_args()
    publish(name, run(args.quick), args, render)


def command(name: str) -> str:
    """How a benchmark is run by itself."""
    return f".venv/bin/python -m bench.{name}"


def read_result(name: str, out_dir: Path) -> dict[str, Any]:
    return json.loads((out_dir / f"{name}.json").read_text())


def markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
        return str(value)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)
