"""Benchmark 7: does Prisma find what a person would look for? Recovery of known categories on labelled corpora.

    .venv/bin/python -m bench.quality [--quick] [--corpora bbc_news,ag_news_test,mtsamples] [--no-bertopic]

Each corpus runs through the default pipeline (the code the app and the CLI use: ingest, embed, train with the
settings suggested for its size, themes, keyword labels, families). In the same run, on the same embeddings, the
baselines: k-means with K = the number of categories, a 5-fold cross-validated logistic-regression probe (the
ceiling: it is told the categories) and BERTopic with its default settings.

Per level (theme, family, feature) and baseline:
- best-F1: for each category, the best F1 between "document has the category" and "document belongs to this unit",
  averaged over categories. A document belongs to a theme as `Themes.members` says, to a feature when the feature
  is among its strong activations (`analysis.strong_codes`), to a family when one of its features is.
- purity: the share of each unit's documents in its commonest category, averaged over units weighted by size.
- coverage: the share of documents that belong to at least one unit.
- shown: how many units an analyst sees (themes; families; features that fire).
- duplicate labels: labels shared by two or more units of the level.
- label score: mean embedding score (ROC-AUC of the label's similarity to the unit's documents vs the others); the
  same labels shuffled across units give the chance baseline.

Whether the concepts hold up: the default run is trained with SEEDS (three seeds), and per corpus:
- recurring: the share of a run's firing features that recur in every other seed's run (a feature of the other run
  whose activations over the same documents correlate with it at >= 0.7, `prisma_core.sae.recurrence`), mean over runs;
  the same weighted by the documents each feature fires on; the median best correlation;
- decoder match: the share of firing features whose direction has a cosine >= 0.7 with a feature of every other run;
- theme agreement: adjusted Rand index of the documents' strongest themes, mean over pairs of runs; sub-theme
  agreement the same for the documents' sub-themes;
- held-out minus train FVU, and the seconds of SAE training and of the whole run stage (means over the seeds).
The recovery levels above come from the first seed's run.

Theme levels (issue 25): a corpus's labels are measured against the level they describe. The shared corpora have one
level of labels each: BBC News' 5 desks and AG News' 4 sections are broad (the theme level), MTSamples' 40
specialties fine (the sub-theme level); LABEL_LEVEL says so. A corpus with a `parent` column beside `label` (20
newsgroups' 7 parent groups) is measured at both: `parent` at the theme level, `label` at the sub-theme level; any
other corpus at the theme level when it has no more categories than the themes' automatic range allows, else at the
sub-theme level. Per level: recovery against k-means with K known and the probe on the same labels, the number
chosen against the true one, agreement across seeds; and the share of documents that fit a theme well
(`Themes.fits`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench import common
from bench.quality_scores import baselines, duplicates, label_scores, one_hot, prisma_levels, recovery, stability

NAME = "quality"
TITLE = "7. Quality: recovery of known categories (themes, families, features vs k-means, probe, BERTopic)"
CORPORA = ("bbc_news", "ag_news_test", "mtsamples")
QUICK_DOCS = 400
TARGETS = {
    "bbc_news": {"theme": 0.90, "feature": 0.75, "label_score": 0.85},
    "ag_news_test": {"theme": 0.80},
    "mtsamples": {"subtheme": 0.45, "label_score": 0.85},
}
MAX_THEMES = 50
MIN_COVERAGE = 0.95
LABEL_LEVEL = {"bbc_news": "theme", "ag_news_test": "theme", "mtsamples": "subtheme"}
"""The level each shared corpus's single set of labels describes."""
PARENT_COLUMN = "parent"
LEVEL_TARGETS = {"theme": 0.95, "subtheme": 1.0}
"""Recovery at a level as a share of k-means with K known on that level's labels."""
MIN_AGREEMENT = 0.90
SEEDS = (0, 1, 2)
SAE_SETTINGS = ("n_features", "k", "epochs", "nested_levels", "n_trainings")
STABILITY_TARGETS = {"recurring_by_documents": 0.70, "recurring": 0.50, "fvu_gap": 0.10, "theme_agreement": 0.90}


def run(corpora: list[str], cache: Path, quick: bool = False, bertopic: bool = True) -> dict[str, Any]:
    return {
        "device": common.device_report(),
        "quick": quick,
        "corpora": {name: _corpus(name, cache, quick, bertopic) for name in corpora},
    }


def _corpus(name: str, cache: Path, quick: bool, bertopic: bool) -> dict[str, Any]:
    from prisma_core import pipeline
    from prisma_core.embed import EmbedConfig, model_key
    from prisma_core.ingest import IngestConfig
    from prisma_core.store import Workspace

    workspace = Workspace(cache / "quality_workspace")
    source = common.CORPORA_DIR / f"{name}.parquet"
    dataset_name = f"{name}-{QUICK_DOCS if quick else 'all'}"
    dataset = next((d for d in workspace.datasets() if d.name == dataset_name), None)
    if dataset is None:
        if quick:
            subset = cache / f"{dataset_name}.parquet"
            common.shuffled_documents(source).head(QUICK_DOCS).to_parquet(subset)
            source = subset
        dataset_id, _ = pipeline.ingest(workspace, [source], dataset_name, IngestConfig("text", id_column="id"))
    else:
        dataset_id = dataset.dataset_id
    pipeline.embed_dataset(workspace, dataset_id)
    vectors = workspace.vectors(dataset_id, model_key(EmbedConfig()))
    metadata = workspace.metadata(dataset_id)
    categories = metadata["label"].astype(str).to_numpy()

    runs, timings = _seeded_runs(workspace, dataset_id)
    run = runs[0]
    levels = prisma_levels(run)
    scores = label_scores(run, vectors, levels)
    result: dict[str, Any] = {
        "n_documents": len(categories),
        "n_categories": len(np.unique(categories)),
        "train_seconds": timings["pipeline"],
        "fvu_holdout": run.record.metrics["fvu_holdout"],
        "fvu_train": run.record.metrics["fvu_train"],
        "dead_fraction": run.record.metrics["dead_fraction"],
        "sae": {k: run.record.config["sae"][k] for k in SAE_SETTINGS if k in run.record.config["sae"]},
        "stability": stability(runs) | {f"{step}_seconds": seconds for step, seconds in timings.items()},
        "levels": {},
        "theme_labels": run.theme_info["label"].tolist(),
        "theme_levels": _theme_levels(name, run, metadata, vectors),
    }
    for level, (members, labels) in levels.items():
        result["levels"][level] = recovery(members, categories) | {
            "duplicate_labels": duplicates(labels),
            "label_score": scores[level][0],
            "label_score_shuffled": scores[level][1],
        }
    for baseline, members in baselines(vectors, categories, run.record.embedding_key, bertopic, workspace, dataset_id):
        result["levels"][baseline] = recovery(members, categories)
    return result


def _seeded_runs(workspace: Any, dataset_id: str) -> tuple[list[Any], dict[str, float]]:
    """The default run trained with each of SEEDS, and the mean seconds of its SAE training and whole run stage."""
    from dataclasses import replace

    from prisma_core import pipeline

    runs, train, whole = [], [], []
    for seed in SEEDS:
        config = replace(pipeline.suggested_sae_config(workspace, dataset_id), seed=seed)
        started = time.perf_counter()
        summary = pipeline.train_run(workspace, dataset_id, config)
        whole.append(time.perf_counter() - started)
        train.append(summary.seconds["train"])
        runs.append(pipeline.load_run(workspace, summary.run_id))
    return runs, {"train": float(np.mean(train)), "pipeline": float(np.mean(whole))}


def _theme_levels(name: str, run: Any, metadata: pd.DataFrame, vectors: np.ndarray) -> dict[str, Any]:
    """Per level the labels describe: the categories' number, the number chosen, recovery of the level and of
    k-means K and the probe on the same labels; and the share of documents that fit a theme well."""
    found: dict[str, Any] = {
        "fits_well": float(run.themes.fits().mean()),
        "subtheme_count": run.subthemes.n_subthemes,
    }
    chosen = {"theme": run.themes.n_themes, "subtheme": run.subthemes.n_subthemes}
    members = {"theme": run.themes.members(), "subtheme": one_hot(np.maximum(run.subthemes.assignment, 0))}
    for level, categories in _labelled_levels(name, run, metadata).items():
        reference = dict(baselines(vectors, categories, run.record.embedding_key, False, None, ""))
        found[level] = {
            "true": len(np.unique(categories)),
            "chosen": chosen[level],
            "prisma": recovery(members[level], categories)["best_f1"],
            "k-means K": recovery(reference["k-means K"], categories)["best_f1"],
            "probe": recovery(reference["probe (ceiling)"], categories)["best_f1"],
        }
    return found


def _labelled_levels(name: str, run: Any, metadata: pd.DataFrame) -> dict[str, np.ndarray]:
    """level -> the categories that describe it (see the module docstring)."""
    from prisma_core.concepts.themes import max_themes

    labels = metadata["label"].astype(str).to_numpy()
    if PARENT_COLUMN in metadata.columns:
        return {"theme": metadata[PARENT_COLUMN].astype(str).to_numpy(), "subtheme": labels}
    broad = len(np.unique(labels)) <= max_themes(len(labels))
    return {LABEL_LEVEL.get(name, "theme" if broad else "subtheme"): labels}


def markdown(result: dict[str, Any]) -> str:
    lines = []
    for name, corpus in result["corpora"].items():
        lines += [
            f"### {name}: {corpus['n_documents']:,} documents, {corpus['n_categories']} categories",
            "",
            f"SAE (suggested for this size): {corpus['sae']}; held-out FVU {corpus['fvu_holdout']:.3f} (train "
            f"{corpus['fvu_train']:.3f}), dead latents {corpus['dead_fraction']:.1%}; pipeline "
            f"{corpus['train_seconds']:.0f} s.",
            "",
            f"Themes: {', '.join(corpus['theme_labels'])}.",
            "",
            _stability_table(corpus["stability"]),
            "",
            _levels_table(corpus),
            "",
        ]
        rows = [
            [
                level,
                values["best_f1"],
                values["purity"],
                values["coverage"],
                values["shown"],
                values.get("duplicate_labels", "-"),
                _score(values),
            ]
            for level, values in corpus["levels"].items()
        ]
        lines += [
            common.markdown_table(
                ["level", "mean best-F1", "purity", "coverage", "shown", "duplicate labels", "label score (shuffled)"],
                rows,
            ),
            "",
            *_verdicts(name, corpus),
            "",
        ]
    return "\n".join(lines)


def _stability_table(stability: dict[str, float]) -> str:
    header = [
        f"seeds {', '.join(map(str, SEEDS))}",
        "features",
        "recurring",
        "recurring (by documents)",
        "median best correlation",
        "decoder match",
        "theme agreement (ARI)",
        "FVU train / held-out (gap)",
        "SAE training s",
        "run stage s",
    ]
    row = [
        "mean over runs",
        f"{stability['features']:.0f}",
        f"{stability['recurring']:.1%}",
        f"{stability['recurring_by_documents']:.1%}",
        f"{stability['median_best_correlation']:.2f}",
        f"{stability['decoder_match']:.1%}",
        f"{stability['theme_agreement']:.3f}",
        f"{stability['fvu_train']:.3f} / {stability['fvu_holdout']:.3f} ({stability['fvu_gap']:+.3f})",
        f"{stability['train_seconds']:.1f}",
        f"{stability['pipeline_seconds']:.1f}",
    ]
    return common.markdown_table(header, [row])


def _levels_table(corpus: dict[str, Any]) -> str:
    levels = corpus["theme_levels"]
    agreement = {level: corpus["stability"][f"{level}_agreement"] for level in ("theme", "subtheme")}
    rows = [
        [
            level,
            f"{levels[level]['chosen']} (true {levels[level]['true']})",
            f"{levels[level]['prisma']:.3f}",
            f"{levels[level]['k-means K']:.3f}",
            f"{levels[level]['probe']:.3f}",
            f"{agreement[level]:.3f}",
        ]
        for level in ("theme", "subtheme")
        if level in levels
    ]
    header = ["labels at level", "number chosen", "best-F1", "k-means K", "probe", "agreement (ARI)"]
    return (
        f"{common.markdown_table(header, rows)}\n\nDocuments that fit a theme well: {levels['fits_well']:.1%}. "
        f"Across seeds, theme agreement {agreement['theme']:.3f}, sub-theme agreement {agreement['subtheme']:.3f} "
        f"({levels['subtheme_count']} sub-themes)."
    )


def _score(values: dict[str, Any]) -> str:
    if "label_score" not in values:
        return "-"
    return f"{values['label_score']:.3f} ({values['label_score_shuffled']:.3f})"


def _verdicts(name: str, corpus: dict[str, Any]) -> list[str]:
    levels = corpus["levels"]
    theme = levels["theme"]
    checks = [
        (
            f"{level} best-F1 >= {LEVEL_TARGETS[level]} x k-means K ({found['k-means K']:.3f})",
            found["prisma"],
            LEVEL_TARGETS[level] * found["k-means K"],
        )
        for level, found in corpus["theme_levels"].items()
        if level in LEVEL_TARGETS
    ]
    checks += [
        (f"documents that fit a theme well >= {MIN_COVERAGE:.0%}", corpus["theme_levels"]["fits_well"], MIN_COVERAGE),
        (f"at most {MAX_THEMES} themes", -theme["shown"], -MAX_THEMES),
        (f"coverage >= {MIN_COVERAGE:.0%}", theme["coverage"], MIN_COVERAGE),
    ]
    targets = TARGETS.get(name, {})
    for level in ("theme", "subtheme"):
        if level in targets:
            checks.append((f"{level} best-F1 >= {targets[level]}", levels[level]["best_f1"], targets[level]))
    if "feature" in targets:
        checks.append((f"feature best-F1 >= {targets['feature']}", levels["feature"]["best_f1"], targets["feature"]))
    if "label_score" in targets:
        feature_score = levels["feature"]["label_score"]
        checks.append((f"feature label score >= {targets['label_score']}", feature_score, targets["label_score"]))
    duplicates = sum(levels[level]["duplicate_labels"] for level in ("theme", "feature"))
    checks.append(("no duplicate theme or feature labels", -duplicates, 0))
    stability, stable = corpus["stability"], STABILITY_TARGETS
    checks += [
        (
            f"recurring by documents >= {stable['recurring_by_documents']:.0%}",
            stability["recurring_by_documents"],
            stable["recurring_by_documents"],
        ),
        (f"recurring >= {stable['recurring']:.0%}", stability["recurring"], stable["recurring"]),
        (f"held-out minus train FVU <= {stable['fvu_gap']}", -stability["fvu_gap"], -stable["fvu_gap"]),
        (f"theme agreement >= {stable['theme_agreement']}", stability["theme_agreement"], stable["theme_agreement"]),
        (f"sub-theme agreement >= {MIN_AGREEMENT}", stability["subtheme_agreement"], MIN_AGREEMENT),
    ]
    return [f"- {what}: **{common.verdict(measured, target)}**" for what, measured, target in checks]


def main() -> None:
    arguments = common.parser(__doc__.splitlines()[0])
    arguments.add_argument("--corpora", default=",".join(CORPORA), help="comma-separated corpus names")
    arguments.add_argument("--no-bertopic", action="store_true", help="skip the BERTopic baseline")
    args = arguments.parse_args()
    corpora = args.corpora.split(",")
    common.publish(NAME, run(corpora, args.cache, args.quick, not args.no_bertopic), args, markdown)


if __name__ == "__main__":
    main()
