"""Benchmark 20: one answer across machines: the themes of a default run at fp32, bf16 and int8 (issue 50).

    .venv/bin/python -m bench.backends [--quick] [--documents N] [--corpora bbc_news,ag_news_test,mtsamples]

For each shared corpus, N documents drawn with a fixed seed (`common.shuffled_documents`, seed 0) are ingested and
embedded three times, each precision forced as `auto` would run it on some CPU (`faithful.at_precision`: OpenVINO
fp32 on an AVX2-only CPU, bf16 where it is native, int8 where the CPU has int8 dot products and the dataset passes
the faithful check), then trained with the default pipeline (the settings suggested for its size, seed 0). Against
the fp32 run, per precision:
- the document vectors' cosine to fp32 (mean and the lowest document);
- theme agreement: adjusted Rand index of the documents' strongest themes, and the same for sub-themes, as
  `bench.quality` measures agreement across seeds (`quality_scores.stability`);
- recurring features: the share of firing features that recur in the other run (`prisma_core.sae.recurrence`), plain and
  weighted by the documents each fires on.
For context, the same measures between the fp32 run and an fp32 run with another SAE seed (NOISE_SEED), the
seed-to-seed agreement `bench.quality` reports. It is no floor for a change of vectors: themes and sub-themes
start from k-means on the embeddings with a fixed seed, so two SAE seeds on the same vectors share those clusters
(BENCHMARKS.md section 20 compares another k-means seed). Also reported: what `auto` chooses for the dataset on
this machine.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bench import common
from bench.quality_scores import stability

NAME = "backends"
TITLE = "20. One answer across machines: themes at fp32, bf16 and int8 (issue 50)"
CORPORA = ("bbc_news", "ag_news_test", "mtsamples")
PRECISIONS = ("fp32", "bf16", "int8")
DOCUMENTS = 1000
"""Documents per corpus in a full run: the three corpora, three embeddings and four trainings each in about 30 minutes
on 2 shared cores."""
QUICK_DOCUMENTS = 200
SAMPLE_SEED = 0
SEED = 0
NOISE_SEED = 1
TARGET_THEME_ARI = 0.9
"""Theme agreement with fp32 that every precision `auto` may pick must reach (issue 50, item 2)."""


def run(corpora: list[str], cache: Path, n_documents: int) -> dict[str, Any]:
    return {
        "device": common.device_report(),
        "n_documents": n_documents,
        "corpora": {name: _corpus(name, cache, n_documents) for name in corpora},
        "load_average_1m_end": os.getloadavg()[0],
    }


def _corpus(name: str, cache: Path, n_documents: int) -> dict[str, Any]:
    from prisma_core import pipeline
    from prisma_core.embed import EmbedConfig, model_key
    from prisma_core.embed.faithful import at_precision
    from prisma_core.ingest import IngestConfig
    from prisma_core.store import Workspace

    folder = cache / NAME / f"{name}-{n_documents}-{time.time_ns()}"
    folder.mkdir(parents=True)
    sample = folder / "sample.parquet"
    common.shuffled_documents(common.CORPORA_DIR / f"{name}.parquet", SAMPLE_SEED).head(n_documents).to_parquet(sample)
    workspace = Workspace(folder / "workspace")
    dataset_id, _ = pipeline.ingest(workspace, [sample], name, IngestConfig("text", id_column="id"))
    auto = pipeline.precision_choice(workspace, dataset_id, EmbedConfig())
    configs = {precision: at_precision(EmbedConfig(), precision) for precision in PRECISIONS}
    embedded = {
        precision: pipeline.embed_dataset(workspace, dataset_id, config) for precision, config in configs.items()
    }
    vectors = {precision: workspace.vectors(dataset_id, model_key(config)) for precision, config in configs.items()}
    runs = {precision: _trained(workspace, dataset_id, config, SEED) for precision, config in configs.items()}
    reference = runs["fp32"]
    compared = {f"fp32 seed {NOISE_SEED}": _trained(workspace, dataset_id, configs["fp32"], NOISE_SEED)}
    compared |= {precision: runs[precision] for precision in PRECISIONS if precision != "fp32"}
    return {
        "n_documents": len(vectors["fp32"]),
        "auto": {"precision": auto.precision, "backend": auto.backend, "reason": auto.reason},
        "sae": {k: reference.record.config["sae"][k] for k in ("n_features", "k", "epochs", "nested_levels")},
        "spaces": {precision: summary.embedding_key for precision, summary in embedded.items()},
        "embed_seconds": {precision: summary.seconds for precision, summary in embedded.items()},
        "content_tokens": embedded["fp32"].n_tokens,
        "reference": _shape(reference),
        "compared": {
            side: _agreement(reference, run, vectors["fp32"], vectors[side.split()[0]])
            for side, run in compared.items()
        },
    }


def _trained(workspace: Any, dataset_id: str, config: Any, seed: int) -> Any:
    """The default run of the dataset in `config`'s vector space, trained with `seed`."""
    from prisma_core import pipeline

    settings = replace(pipeline.suggested_sae_config(workspace, dataset_id, config), seed=seed)
    summary = pipeline.train_run(workspace, dataset_id, settings, embed_config=config)
    return pipeline.load_run(workspace, summary.run_id)


def _shape(run: Any) -> dict[str, int]:
    return {"themes": run.themes.n_themes, "subthemes": run.subthemes.n_subthemes, "features": run.codes.shape[1]}


def _agreement(reference: Any, run: Any, reference_vectors: np.ndarray, vectors: np.ndarray) -> dict[str, Any]:
    """How a run agrees with the fp32 run of seed 0: its vectors' cosines, themes, sub-themes and features."""
    cosine = common.cosine_rows(vectors, reference_vectors)
    agreement = stability([reference, run])
    return _shape(run) | {
        "cosine_mean": float(cosine.mean()),
        "cosine_min": float(cosine.min()),
        "theme_ari": agreement["theme_agreement"],
        "subtheme_ari": agreement["subtheme_agreement"],
        "recurring": agreement["recurring"],
        "recurring_by_documents": agreement["recurring_by_documents"],
    }


def worst_backend_ari(corpus: dict[str, Any]) -> float:
    """The lowest theme agreement with fp32 of bf16 and int8 on a corpus."""
    return min(side["theme_ari"] for name, side in corpus["compared"].items() if name in PRECISIONS)


def markdown(result: dict[str, Any]) -> str:
    header = [
        "corpus (documents)",
        "against fp32 seed 0",
        "themes / sub-themes",
        "cosine to fp32: mean / lowest",
        "theme ARI",
        "sub-theme ARI",
        "recurring features (by documents)",
    ]
    rows = [
        [
            f"{name} ({corpus['n_documents']:,})",
            side,
            f"{found['themes']} / {found['subthemes']}",
            f"{found['cosine_mean']:.5f} / {found['cosine_min']:.5f}",
            f"{found['theme_ari']:.3f}",
            f"{found['subtheme_ari']:.3f}",
            f"{found['recurring']:.1%} ({found['recurring_by_documents']:.1%})",
        ]
        for name, corpus in result["corpora"].items()
        for side, found in corpus["compared"].items()
    ]
    lines = [common.markdown_table(header, rows), ""]
    for name, corpus in result["corpora"].items():
        worst = worst_backend_ari(corpus)
        floor = corpus["compared"][f"fp32 seed {NOISE_SEED}"]["theme_ari"]
        reference = corpus["reference"]
        lines.append(
            f"- {name}: fp32 seed 0 has {reference['themes']} themes, {reference['subthemes']} sub-themes; `auto` "
            f"here: {corpus['auto']['precision']} ({corpus['auto']['reason']}). Lowest theme ARI of bf16 and int8 "
            f"{worst:.3f} (fp32 seed against seed {floor:.3f}); target >= {TARGET_THEME_ARI}: "
            f"**{common.verdict(worst, TARGET_THEME_ARI)}**"
        )
    return "\n".join(lines)


def main() -> None:
    arguments = common.parser(__doc__.splitlines()[0])
    arguments.add_argument("--corpora", default=",".join(CORPORA), help="comma-separated corpus names")
    arguments.add_argument(
        "--documents", type=int, help=f"documents per corpus (default {DOCUMENTS}, quick {QUICK_DOCUMENTS})"
    )
    args = arguments.parse_args()
    n_documents = args.documents or (QUICK_DOCUMENTS if args.quick else DOCUMENTS)
    result = run(args.corpora.split(","), args.cache, n_documents) | {"quick": args.quick}
    common.publish(NAME, result, args, markdown)


if __name__ == "__main__":
    main()
