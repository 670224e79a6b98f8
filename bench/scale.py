"""10. Scale: a large corpus of real sentences through every stage, time and peak memory per stage.

    .venv/bin/python -m bench.scale [--quick] [--docs N] [--embed-sample N] [--ingest-only]

The corpus: each document draws 4 to 16 sentences of one label of the shared corpora (BBC News, AG News and
MTSamples, so topics stay coherent and lengths realistic), in `--docs` documents. Stages, each in a fresh process
whose peak resident memory (VmHWM) is reported:
1. ingest: the generated parquet file into a new workspace (`pipeline.ingest`);
2. embed: the first `--embed-sample` documents embedded for real (content tokens/s, extrapolated to the whole corpus);
   every other document gets a vector resampled from the embedded ones (`common.resample`: mixtures of two real
   vectors plus noise), stored through the product's embedding path (documents read a window at a time, vectors
   written a slice at a time), so that its memory is measured and the later stages see the real size and shape;
3. run: the SAE with the settings suggested for the corpus size, then features, keyword labels, themes and families
   (`pipeline.train_run`), with the peak memory of each part (a sampler thread, attributed by progress). Above
   `SAEConfig.vectors_memory_mb` training reads the vectors from the table a slice at a time, and the analysis reads
   the vectors in slices and the texts in batches.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from bench import common

NAME = "scale"
TITLE = "12. Scale: a large corpus through every stage, time and peak memory per stage"
DOCS = 200_000
EMBED_SAMPLE = 4_000
QUICK_DOCS = 3_000
QUICK_EMBED_SAMPLE = 200
CORPORA = ("bbc_news.parquet", "ag_news_test.parquet", "mtsamples.parquet")
SENTENCES_PER_DOCUMENT = (4, 16)
CORPUS_ROWS = 50_000
TARGET_PEAK_MB = 4096.0
"""Issue 14: 200,000 real-length documents end to end with peak memory <= 4 GB."""
SAE_OVERRIDES = ("n_features", "n_trainings", "epochs")
"""SAE settings the command line can set for the run stage: a million documents with the suggested SAE take hours on
2 cores, a smaller one shows the memory of every part in less."""
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def run(
    quick: bool = False,
    n_docs: int | None = None,
    embed_sample: int | None = None,
    ingest_only: bool = False,
    sae_flags: Sequence[str] = (),
) -> dict[str, Any]:
    """sae_flags: `name=value` settings of the run's SAE in place of the suggested ones (see SAE_OVERRIDES)."""
    n_docs = n_docs or (QUICK_DOCS if quick else DOCS)
    embed_sample = min(n_docs, embed_sample or (QUICK_EMBED_SAMPLE if quick else EMBED_SAMPLE))
    with tempfile.TemporaryDirectory(prefix="prisma-bench-scale-") as folder:
        built = build(Path(folder), n_docs, embed_sample, ingest_only, quick, sae_flags)
    return {"device": common.device_report(), "quick": quick, "documents": n_docs, "embed_sample": embed_sample} | built


def build(
    folder: Path,
    n_docs: int,
    embed_sample: int,
    ingest_only: bool = False,
    quick: bool = False,
    sae_flags: Sequence[str] = (),
) -> dict[str, Any]:
    """Generates the corpus in `folder` and runs its stages into `folder`/workspace, each in its own process:
    corpus_mb, median_words, generate_seconds and each stage's result."""
    source, workspace = folder / "corpus.parquet", folder / "workspace"
    generated_seconds, words = common.timed(lambda: write_corpus(source, n_docs))
    stages = {"ingest": _worker("ingest", workspace, source)}
    if not ingest_only:
        stages["embed"] = _worker("embed", workspace, source, str(embed_sample))
        stages["run"] = _worker("run", workspace, source, *(["--quick"] if quick else []), *sae_flags)
    return {
        "corpus_mb": source.stat().st_size / 2**20,
        "median_words": words,
        "generate_seconds": generated_seconds,
        "stages": stages,
    }


def write_corpus(path: Path, n_docs: int, seed: int = 0) -> int:
    """Writes n_docs documents of real sentences (one label each) to a parquet file, CORPUS_ROWS at a time (one row
    group each, so a million documents never sit in memory); returns the median words of the first 10,000."""
    rng = np.random.default_rng(seed)
    pools = [pool for name in CORPORA for pool in _sentences_by_label(common.CORPORA_DIR / name).values()]
    words: list[int] = []
    with pq.ParquetWriter(path, pa.schema({"id": pa.string(), "text": pa.string(), "label": pa.string()})) as writer:
        for start in range(0, n_docs, CORPUS_ROWS):
            size = min(CORPUS_ROWS, n_docs - start)
            which = rng.integers(0, len(pools), size)
            lengths = rng.integers(*SENTENCES_PER_DOCUMENT, size, endpoint=True)
            texts = [" ".join(rng.choice(pools[pool], length)) for pool, length in zip(which, lengths, strict=True)]
            ids = [f"doc{i}" for i in range(start, start + size)]
            writer.write_table(pa.table({"id": ids, "text": texts, "label": [f"topic {pool}" for pool in which]}))
            words += [len(text.split()) for text in texts[: max(0, 10_000 - len(words))]]
    return int(np.median(words))


def _sentences_by_label(path: Path) -> dict[str, np.ndarray]:
    frame = pd.read_parquet(path, columns=["text", "label"])
    return {
        str(label): np.array([s for text in group["text"] for s in _SENTENCE_END.split(text) if len(s.split()) >= 4])
        for label, group in frame.groupby("label")
    }


def _worker(stage: str, workspace: Path, source: Path, *extra: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.scale", "--worker", stage, str(workspace), str(source), *extra]
    done = subprocess.run(command, cwd=common.REPO, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"scale worker {stage} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{stage}: {json.dumps(result, default=float)}", file=sys.stderr, flush=True)  # a long run's partial record
    return result


# -- workers: one stage each, in a fresh process -----------------------------------------------------------------


def ingest_stage(workspace: Path, source: Path) -> dict[str, Any]:
    from prisma_core import pipeline
    from prisma_core.ingest import IngestConfig
    from prisma_core.store import Workspace

    config = IngestConfig(id_column="id")
    seconds, (dataset_id, report) = common.timed(
        lambda: pipeline.ingest(Workspace(workspace), [source], "scale", config)
    )
    return {
        "seconds": seconds,
        "dataset_id": dataset_id,
        "n_documents": report.n_documents,
        "batch_rows": config.batch_rows,
    }


def embed_stage(workspace_path: Path, embed_sample: int) -> dict[str, Any]:
    """The product's embedding path (`pipeline.dataset.embed_with`: documents read a window at a time, vectors
    stored a slice at a time, the cache looked up), with the first `embed_sample` documents embedded for real and
    every other one given a resampled vector instead of hours of computing."""
    from prisma_core.embed import EmbedConfig, embed_documents
    from prisma_core.pipeline.dataset import SLICE_DOCUMENTS, embed_with
    from prisma_core.pipeline.slices import ComputedSlice
    from prisma_core.progress import ignore_progress
    from prisma_core.store import Workspace

    workspace = Workspace(workspace_path)
    dataset_id = workspace.datasets()[0].dataset_id
    sample = next(workspace.document_batches(dataset_id, ["position", "text", "text_hash"], embed_sample))
    sample = sample.sort_values("position")
    config = EmbedConfig()
    embed_documents(sample["text"].head(8).tolist(), config)  # loads the model: not part of the throughput
    seconds, embedded = common.timed(lambda: embed_documents(sample["text"].tolist(), config))
    real = dict(zip(sample["text_hash"], embedded.vectors, strict=True))
    seeds = itertools.count(1)  # every slice of every window draws other vectors

    def sample_or_resampled(missing: pd.DataFrame, _: Any, slice_documents: int) -> Iterator[ComputedSlice]:
        for start in range(0, len(missing), slice_documents):
            hashes = missing["text_hash"].iloc[start : start + slice_documents].tolist()
            stand_ins = common.resample(embedded.vectors, len(hashes), seed=next(seeds))
            vectors = [real.get(text_hash, stand_in) for text_hash, stand_in in zip(hashes, stand_ins, strict=True)]
            yield ComputedSlice(dict(zip(hashes, vectors, strict=True)), 0, 0)

    store_seconds, summary = common.timed(
        lambda: embed_with(workspace, dataset_id, config, ignore_progress, SLICE_DOCUMENTS, sample_or_resampled)
    )
    tokens = int(embedded.chunking.tokens_per_doc.sum())
    n_documents = workspace.dataset(dataset_id).n_documents
    return {
        "sample_seconds": seconds,
        "sample_tokens": tokens,
        "tokens_per_s": tokens / seconds,
        "extrapolated_seconds": seconds * n_documents / len(sample),
        "store_seconds": store_seconds,
        "all_stored": workspace.has_vectors(dataset_id, summary.embedding_key),
    }


def run_stage(workspace_path: Path, quick: bool, **sae_overrides: int) -> dict[str, Any]:
    from dataclasses import replace

    from prisma_core import pipeline
    from prisma_core.sae import suggest_config
    from prisma_core.store import Workspace

    workspace = Workspace(workspace_path)
    dataset = workspace.datasets()[0]
    config = suggest_config(dataset.n_documents, 384)
    config = replace(config, epochs=2) if quick else config
    config = replace(config, **sae_overrides)
    sampler = _StageMemory()
    with sampler:
        summary = pipeline.train_run(workspace, dataset.dataset_id, config, progress=sampler.progress)
    return {
        "seconds": summary.seconds,
        "peak_mb_by_part": sampler.peaks,
        "sae": {
            "n_features": config.n_features,
            "n_latents": summary.metrics["features_kept"],
            "k": config.k,
            "epochs": config.epochs,
            "streamed": not config.holds_in_memory(dataset.n_documents, 384),
            "vectors_memory_mb": config.vectors_memory_mb,
        },
        "fvu_holdout": summary.metrics["fvu_holdout"],
        "dead_fraction": summary.metrics["dead_fraction"],
        "n_themes": summary.n_themes,
        "n_families": summary.n_families,
    }


PARTS = {"train_sae": "train", "label": "analyse", "embedding scores": "analyse", "themes": "themes"}
"""Progress stage -> the part of the run it belongs to (the parts `pipeline.train_run` times)."""


class _StageMemory:
    """Samples this process's resident memory every 50 ms and keeps the peak of each part of the run, the part being
    the one of the latest progress report."""

    def __init__(self) -> None:
        self.part = "read vectors"
        self.peaks: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def progress(self, event: Any) -> None:
        self.part = PARTS.get(event.stage, event.stage)

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            rss = _rss_mb()
            self.peaks[self.part] = max(self.peaks.get(self.part, 0.0), rss)

    def __enter__(self) -> _StageMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _sae_overrides(extra: Sequence[str]) -> dict[str, int]:
    pairs = (flag.split("=", 1) for flag in extra if "=" in flag)
    return {name: int(value) for name, value in pairs if name in SAE_OVERRIDES}


def _worker_main(stage: str, workspace: Path, source: Path, extra: list[str]) -> None:
    started = time.perf_counter()
    if stage == "ingest":
        result = ingest_stage(workspace, source)
    elif stage == "embed":
        result = embed_stage(workspace, int(extra[0]))
    else:
        result = run_stage(workspace, quick="--quick" in extra, **_sae_overrides(extra))
    result |= {"wall_seconds": time.perf_counter() - started, "peak_mb": common.peak_rss_mb()}
    print(json.dumps(result, default=float))


# -- report ------------------------------------------------------------------------------------------------------


def markdown(result: dict[str, Any]) -> str:
    stages = result["stages"]
    if "embed" not in stages:
        return _ingest_markdown(result)
    embed, run_part = stages["embed"], stages["run"]
    rows = [
        ["ingest (read, hash, store)", stages["ingest"]["seconds"], stages["ingest"]["peak_mb"]],
        [
            f"embed: {result['embed_sample']:,} documents for real, the rest extrapolated",
            f"{embed['extrapolated_seconds']:,.0f} (extrapolated; {embed['tokens_per_s']:,.0f} tokens/s)",
            embed["peak_mb"],
        ],
    ]
    rows += [
        [f"run: {part}", run_part["seconds"].get(part, "-"), mb] for part, mb in run_part["peak_mb_by_part"].items()
    ]
    peak = max(stages["ingest"]["peak_mb"], embed["peak_mb"], run_part["peak_mb"])
    table = common.markdown_table(["stage", "seconds", "peak MB"], rows)
    verdict = common.verdict(peak, TARGET_PEAK_MB, higher_is_better=False)
    smaller = "" if result["documents"] >= DOCS else " (a smaller run)"
    return f"""{result["documents"]:,} documents of real sentences (median {result["median_words"]} words), generated in
{result["generate_seconds"]:.0f} s. SAE: {run_part["sae"]["n_latents"]:,} features kept of
{run_part["sae"]["n_features"]:,}, k = {run_part["sae"]["k"]},
{run_part["sae"]["epochs"]} epochs, {_training_read(run_part["sae"])}: held-out FVU {run_part["fvu_holdout"]:.3f},
dead {run_part["dead_fraction"]:.1%}, {run_part["n_themes"]} themes, {run_part["n_families"]:,} families.
Each stage ran in its own process.

{table}

- Peak resident memory of any stage: **{peak:,.0f} MB**; target <= {TARGET_PEAK_MB:,.0f} MB at 200,000 documents:
  **{verdict}**{smaller}."""


def _ingest_markdown(result: dict[str, Any]) -> str:
    """`--ingest-only`: the ingest stage alone."""
    ingest = result["stages"]["ingest"]
    table = common.markdown_table(
        ["documents", "corpus MB", "batch rows", "seconds", "peak MB"],
        [
            [
                f"{result['documents']:,}",
                result.get("corpus_mb", "-"),
                ingest.get("batch_rows", "-"),
                ingest["seconds"],
                ingest["peak_mb"],
            ]
        ],
    )
    return f"Ingest only (`--ingest-only`), in its own process:\n\n{table}"


def _training_read(sae: dict[str, Any]) -> str:
    """How training read the vectors (results from before the streamed path have no such entry)."""
    if "streamed" not in sae:
        return "vectors in memory"
    where = "vectors and texts read in slices" if sae["streamed"] else "vectors in memory"
    return f"{where} (bound {sae['vectors_memory_mb']:,.0f} MB)"


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker_main(sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]), sys.argv[5:])
        return
    arguments = common.parser(__doc__.splitlines()[0])
    arguments.add_argument("--docs", type=int, help=f"documents to generate (default {DOCS:,}; quick {QUICK_DOCS:,})")
    arguments.add_argument("--embed-sample", type=int, help=f"documents embedded for real (default {EMBED_SAMPLE:,})")
    arguments.add_argument("--ingest-only", action="store_true", help="stop after the ingest stage")
    for name in SAE_OVERRIDES:
        arguments.add_argument(f"--{name.replace('_', '-')}", type=int, help=f"SAE {name} (default: suggested)")
    args = arguments.parse_args()
    sae_flags = [f"{name}={getattr(args, name)}" for name in SAE_OVERRIDES if getattr(args, name) is not None]
    result = run(args.quick, args.docs, args.embed_sample, args.ingest_only, sae_flags)
    common.publish(NAME, result, args, markdown)


if __name__ == "__main__":
    main()
