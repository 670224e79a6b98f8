"""12b. Quality of the bounded analysis: the same run's labels and themes with the corpus in memory and read in batches.

    .venv/bin/python -m bench.bounded_quality [--quick] [--corpus ag_news_test] [--sample 2000]

One SAE is trained (in memory, so both analyses see the same features); its analysis (keyword labels, label scores,
themes, families) then runs twice: as `pipeline.train_run` does below `SAEConfig.vectors_memory_mb`, and as it does
above it (texts scanned in batches, vectors read a slice at a time), with the samples of the bounded path shrunk to
`--sample` documents (vocabulary and k-means; a tenth of it per large class), so a small corpus goes through the
sampling a million documents would. Reported per level: best-F1 against the corpus's categories, duplicate labels,
the labels' embedding score, and how many feature labels are the same in both.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from bench import common
from bench.quality_scores import duplicates, label_scores, prisma_levels, recovery

NAME = "bounded_quality"
TITLE = "12b. Quality of the bounded analysis: in memory vs read in batches, on one run"
QUICK_DOCS = 1_000


def run(corpus: str, sample: int, quick: bool = False) -> dict[str, Any]:
    from prisma_core import pipeline
    from prisma_core.concepts import themes
    from prisma_core.embed import EmbedConfig, model_key
    from prisma_core.ingest import IngestConfig
    from prisma_core.interpret import keywords
    from prisma_core.pipeline import training
    from prisma_core.store import Workspace

    with tempfile.TemporaryDirectory(prefix="prisma-bench-bounded-") as folder:
        source = common.CORPORA_DIR / f"{corpus}.parquet"
        if quick:
            subset = Path(folder) / "subset.parquet"
            common.shuffled_documents(source).head(QUICK_DOCS).to_parquet(subset)
            source = subset
        workspace = Workspace(Path(folder) / "workspace")
        dataset_id, _ = pipeline.ingest(workspace, [source], corpus, IngestConfig("text", id_column="id"))
        pipeline.embed_dataset(workspace, dataset_id)
        vectors = workspace.vectors(dataset_id, model_key(EmbedConfig()))
        categories = workspace.metadata(dataset_id)["label"].astype(str).to_numpy()
        in_memory = pipeline.load_run(workspace, pipeline.train_run(workspace, dataset_id).run_id)
        patches = {
            (training, "_analysis_vectors"): lambda source, config: source,
            (training, "streamed_corpus_terms"): functools.partial(keywords.streamed_corpus_terms, sample=sample),
            (keywords, "CLASS_SAMPLE"): max(sample // 10, 1),
            (themes, "KMEANS_SAMPLE"): sample,
        }
        with contextlib.ExitStack() as stack:
            for (module, name), value in patches.items():
                stack.enter_context(mock.patch.object(module, name, value))
            bounded = pipeline.load_run(workspace, pipeline.train_run(workspace, dataset_id).run_id)
    same_features = np.array_equal(in_memory.codes.toarray(), bounded.codes.toarray())
    labels = [run.features.set_index("feature_id")["label"] for run in (in_memory, bounded)]
    return {
        "corpus": corpus,
        "n_documents": len(categories),
        "sample": sample,
        "same_features": same_features,
        "same_feature_labels": float((labels[0] == labels[1]).mean()),
        "in_memory": _levels(in_memory, vectors, categories),
        "bounded": _levels(bounded, vectors, categories),
    }


def _levels(run: Any, vectors: np.ndarray, categories: np.ndarray) -> dict[str, dict[str, float]]:
    levels = prisma_levels(run)
    scores = label_scores(run, vectors, levels)
    return {
        level: recovery(members, categories) | {"duplicate_labels": duplicates(labels), "label_score": scores[level][0]}
        for level, (members, labels) in levels.items()
    }


def markdown(result: dict[str, Any]) -> str:
    rows = [
        [
            level,
            f"{result['in_memory'][level]['best_f1']:.3f} / {result['bounded'][level]['best_f1']:.3f}",
            f"{result['in_memory'][level]['duplicate_labels']} / {result['bounded'][level]['duplicate_labels']}",
            f"{result['in_memory'][level]['label_score']:.3f} / {result['bounded'][level]['label_score']:.3f}",
            f"{result['in_memory'][level]['shown']} / {result['bounded'][level]['shown']}",
        ]
        for level in result["in_memory"]
    ]
    headers = ["level", "best-F1 (memory / bounded)", "duplicate labels", "label score", "units"]
    return f"""{result["corpus"]}, {result["n_documents"]:,} documents; bounded samples of {result["sample"]:,}
documents (vocabulary, k-means), {max(result["sample"] // 10, 1):,} per large class. Same features in both:
{result["same_features"]}; feature labels identical in both: {result["same_feature_labels"]:.1%}.

{common.markdown_table(headers, rows)}"""


def main() -> None:
    arguments = common.parser(__doc__.splitlines()[0])
    arguments.add_argument("--corpus", default="ag_news_test", help="a corpus of the shared folder, without .parquet")
    arguments.add_argument("--sample", type=int, default=2_000, help="documents of the bounded path's samples")
    args = arguments.parse_args()
    common.publish(NAME, run(args.corpus, args.sample, args.quick), args, markdown)


if __name__ == "__main__":
    sys.exit(main())
