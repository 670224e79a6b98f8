"""Every benchmark in quick mode, end to end on the smallest real data that still exercises each of its parts.

Timings are not asserted (the machine is shared). What is asserted is what each benchmark exists to claim: its ratios
and speed-ups are the quotients of the seconds it measured, and the verdict its markdown gives for each target
(BENCHMARKS.md's "met" or "missed") is the one those numbers earn; similarities and recalls are in [0, 1].
"""

import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

from bench import (
    app_latency,
    backends,
    common,
    embedding,
    end_to_end,
    families,
    fast_cpu,
    gpu,
    passages,
    placement,
    quality,
    ray_scaling,
    report,
    run_all,
    sae_training,
    scale,
    search,
    trends,
)
from bench.memory_sampler import TreeSampler, process_tree, status_mb, tree_rss_mb
from prisma_core import pipeline
from prisma_core.embed import EmbedConfig, cpu_has_native_bf16, model_key, openvino_installed
from prisma_core.embed.config import COSINE_FLOOR
from prisma_core.embed.faithful import at_precision


def positive(value: float) -> bool:
    return math.isfinite(value) and value > 0


def fraction(value: float) -> bool:
    return 0.0 <= value <= 1.0 + 1e-6


def verdict(met: bool) -> str:
    """The word a benchmark's markdown gives a target."""
    return "met" if met else "missed"


@pytest.fixture
def few_speed_documents(monkeypatch: pytest.MonkeyPatch) -> int:
    """Speed comparisons on 6 articles instead of the quick mode's 24: their tests check how the numbers are
    computed and reported, which does not depend on how many documents were timed."""
    monkeypatch.setattr(common, "QUICK_SPEED_DOCS", 6)
    return 6


FEWER_ARTICLES = 200
"""The quality and placement benchmarks' tests run on 200 BBC articles instead of their quick modes' 400 and 300:
their claims (5 desks recovered, labels that beat shuffled ones, added articles placed like trained ones) hold there
with margin, at about half the training time (bench.int8 keeps quality's 400)."""


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """BBC vectors embedded once for the benchmarks that start from embeddings."""
    return tmp_path_factory.mktemp("bench_cache")


@pytest.fixture(scope="module")
def quality_on_fewer_articles(cache_dir: Path) -> dict:
    """bench.quality's quick run on BBC, once: its test reads the result, and the placement benchmark, which draws the
    same articles (`common.shuffled_documents`), finds their vectors in the workspace it leaves in cache_dir."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(quality, "QUICK_DOCS", FEWER_ARTICLES)
        return quality.run(["bbc_news"], cache_dir, quick=True, bertopic=False)


def test_embedding_quick_reports_ratios_truncation_and_cache_speedup(few_speed_documents: int) -> None:
    result = embedding.run(quick=True)
    throughput, truncation, cache = result["throughput"], result["truncation"], result["cache"]
    assert throughput["documents"] == few_speed_documents
    assert positive(throughput["ratio"]) and all(positive(r) for r in throughput["block_ratios"])
    assert throughput["content_tokens"] > throughput["chunks"] > 0
    assert 0.9 <= throughput["agreement_cosine_mean"] <= 1.0 + 1e-6
    assert fraction(truncation["unseen_token_fraction"]) and truncation["unseen_tokens"] > 0
    assert fraction(truncation["truncated_document_fraction"])
    assert truncation["window"] == 254
    assert cache["warm_new_dataset_from_cache"] == cache["documents"]
    assert positive(cache["speedup_same_dataset"]) and positive(cache["speedup_new_dataset"])
    assert throughput["ratio"] == pytest.approx(throughput["plain_seconds"] / throughput["prisma_seconds"])
    assert throughput["block_ratios"] == [pytest.approx(throughput["ratio"])]  # one block in quick mode
    assert throughput["prisma_tokens_per_s"] * throughput["prisma_seconds"] == pytest.approx(
        throughput["content_tokens"]
    )
    assert cache["speedup_same_dataset"] == pytest.approx(cache["cold_seconds"] / cache["warm_same_dataset_seconds"])
    assert cache["speedup_new_dataset"] == pytest.approx(cache["cold_seconds"] / cache["warm_new_dataset_seconds"])
    assert result["space"].endswith("|bf16") or result["space"].endswith("|fp32")  # torch on both sides
    assert result["default_space"] == model_key(EmbedConfig())
    text = embedding.markdown(result)
    assert "Ratio Prisma / plain" in text
    assert f"Target >= {embedding.TARGET_RATIO}x: **{verdict(throughput['ratio'] >= embedding.TARGET_RATIO)}**" in text
    warm = min(cache["speedup_same_dataset"], cache["speedup_new_dataset"])
    assert f"faster than cold: **{verdict(warm >= embedding.TARGET_WARM_SPEEDUP)}**" in text


def test_passages_quick_times_embedding_with_and_without_passages(few_speed_documents: int) -> None:
    result = passages.run(quick=True)
    assert result["documents"] == few_speed_documents
    assert result["spaces"]["default"] == model_key(EmbedConfig())
    for timed in result["throughput"].values():
        assert timed["document_vectors_identical"]
        assert timed["ratio"] == pytest.approx(timed["seconds_without"] / timed["seconds_with"])
        assert timed["block_ratios"] == [pytest.approx(timed["ratio"])]  # one block in quick mode
        assert timed["tokens_per_s_with"] * timed["seconds_with"] == pytest.approx(timed["content_tokens"])
    described, stored = result["passages"], result["storage"]
    assert described["passages"] == stored["passages"] >= few_speed_documents
    assert fraction(described["ending_at_sentence_or_line"])
    assert stored["bytes_per_passage"] > 768  # the float16 vector and the passage's place
    worst = min(timed["ratio"] for timed in result["throughput"].values())
    text = passages.markdown(result)
    assert f"Target >= {passages.TARGET_RATIO}x (within 5%): **{verdict(worst >= passages.TARGET_RATIO)}**" in text


def test_fast_cpu_quick_compares_prismas_paths_with_plain_sentence_transformers() -> None:
    result = fast_cpu.run(quick=True)
    paths = result["paths"]
    openvino = {"openvino_fp32", "openvino_int8"} | ({"openvino_bf16"} if cpu_has_native_bf16() else set())
    assert set(paths) == {"fp32", "plain"} | (openvino if openvino_installed() else set())
    assert result["auto_path"] in paths and result["auto_space"] == model_key(EmbedConfig())
    assert paths["fp32"]["cosine_to_fp32_min"] == pytest.approx(1.0, abs=1e-6)
    prisma = [path for name, path in paths.items() if name != "plain"]
    assert all(COSINE_FLOOR <= path["cosine_to_fp32_min"] <= 1.0 + 1e-6 for path in prisma)
    assert paths["plain"]["cosine_to_fp32_mean"] > 0.99  # its windows are decoded to text and tokenised again
    assert all(positive(path["tokens_per_s"]) for path in paths.values())
    assert all(math.isfinite(value) and value >= 0 for value in result["sae"].values())  # 2 held-out documents
    for path in paths.values():
        assert path["tokens_per_s"] * path["median_seconds"] == pytest.approx(result["content_tokens"])
        per_round = [p / own for p, own in zip(paths["plain"]["seconds"], path["seconds"], strict=True)]
        assert path["x_plain"] == pytest.approx(statistics.median(per_round))
    assert paths["plain"]["x_plain"] == pytest.approx(1.0)
    ratio, met = fast_cpu.verdict(result)
    auto = paths[result["auto_path"]]
    target = fast_cpu.TARGET_X_PLAIN[result["cpu_class"]]
    assert met == (ratio >= target and auto["cosine_to_fp32_min"] >= fast_cpu.TARGET_MIN_COSINE)
    text = fast_cpu.markdown(result)
    assert f"{ratio:.2f}x plain sentence-transformers per content token" in text
    assert f"**{verdict(met)}**" in text.split("`auto` (")[1]


def test_sae_training_quick_scores_both_trainers_alike(cache_dir: Path) -> None:
    result = sae_training.run(quick=True, cache_dir=cache_dir)
    comparisons = [result["comparison"], *result["scaling_n"], *result["scaling_documents"]]
    assert len(comparisons) == 3
    for comparison in comparisons:
        assert positive(comparison["ratio"])
        for trainer in ("prisma", "latentsae"):
            scored = comparison[trainer]
            assert positive(scored["samples_per_s"])
            assert 0.0 <= scored["fvu_holdout"] < 2.0
            assert 0 < scored["fired_latents"] <= comparison["settings"]["n_latents"]
            assert scored["mean_l0_train"] <= comparison["settings"]["k"]
    for comparison in comparisons:
        prisma, latentsae = comparison["prisma"]["samples_per_s"], comparison["latentsae"]["samples_per_s"]
        assert comparison["ratio"] == pytest.approx(prisma / latentsae)
    assert result["comparison"]["settings"]["k_aux"] == 192
    text = sae_training.markdown(result)
    c = result["comparison"]
    met = (
        c["ratio"] >= sae_training.TARGET_RATIO
        and c["prisma"]["fvu_holdout"] <= c["latentsae"]["fvu_holdout"]
        and c["prisma"]["fired_latents"] >= c["latentsae"]["fired_latents"]  # no more dead latents
    )
    assert f"Prisma / latentsae samples/s: {c['ratio']:.2f}x" in text and f"dead fraction: **{verdict(met)}**" in text


def test_families_quick_measures_time_and_memory_in_workers(cache_dir: Path) -> None:
    result = families.run(quick=True, cache_dir=cache_dir)
    assert {case["distribution"] for case in result["cases"]} == {"sae", "synthetic"}
    for case in result["cases"]:
        prisma, baseline = case["prisma"], case["baseline"]
        assert case["nnz"] <= case["documents"] * families.K
        assert positive(prisma["seconds"]) and positive(baseline["seconds"])
        assert 0 < prisma["rss_before_mb"] <= prisma["peak_rss_mb"]
        assert prisma["families"] > 0
        assert prisma["edges"] == case["cooccurrence"]["edges"] == baseline["edges"]  # the same pairs pass tau
    worst_seconds = max(case["prisma"]["seconds"] for case in result["cases"])  # one n_features in quick mode
    worst_mb = max(case["prisma"]["peak_rss_mb"] for case in result["cases"])
    met = worst_seconds < families.TARGET_SECONDS and worst_mb < families.TARGET_MB
    text = families.markdown(result)
    assert f"**{worst_seconds:.1f} s, {worst_mb:,.0f} MB peak**" in text and text.endswith(f"**{verdict(met)}**.")


def test_synthetic_codes_have_at_most_k_features_per_document() -> None:
    codes = families.synthetic_codes(n_features=256, n_docs=500)
    per_document = codes.getnnz(axis=1)
    assert codes.shape == (500, 256)
    assert per_document.max() <= families.K and per_document.min() >= 5
    assert (codes.data > 0).all()


def test_search_quick_recall_and_latency(cache_dir: Path) -> None:
    result = search.run(quick=True, cache_dir=cache_dir)
    assert result["flat"]["recall_at_10"] == pytest.approx(1.0)
    for measured in [result["exact"], result["flat"], result["indexed"], *result["candidates"]]:
        assert positive(measured["p50_ms"]) and measured["p50_ms"] <= measured["p95_ms"]
    for measured in [result["indexed"], *result["candidates"]]:
        assert fraction(measured["recall_at_10"])
    assert "recall@10" in search.markdown(result)


def test_end_to_end_quick_runs_the_cli_cold_then_warm() -> None:
    result = end_to_end.run(quick=True)
    cold, warm = result["cold"], result["warm"]
    assert {"embed", "train", "families"} <= set(cold["stages"])
    documents = end_to_end.QUICK_DOCS
    assert f"embedded {documents} documents" in cold["stdout"]
    assert f": {documents} computed in " in cold["stdout"] and ", 0 from cache, " in cold["stdout"]
    assert f": 0 computed in 0 chunks, {documents} from cache, " in warm["stdout"]
    assert result["speedup"] == pytest.approx(cold["seconds"] / warm["seconds"])
    text = end_to_end.markdown(result)
    cold_met, warm_met = (
        cold["seconds"] < end_to_end.TARGET_COLD_SECONDS,
        warm["seconds"] < end_to_end.TARGET_WARM_SECONDS,
    )
    assert f"target < {end_to_end.TARGET_COLD_SECONDS:.0f} s: **{verdict(cold_met)}**" in text
    assert f"target <= {end_to_end.TARGET_WARM_SECONDS:.0f} s: **{verdict(warm_met)}**" in text


def test_quality_quick_scores_every_level_against_the_baselines(quality_on_fewer_articles: dict) -> None:
    result = quality_on_fewer_articles
    corpus = result["corpora"]["bbc_news"]
    assert corpus["n_documents"] == FEWER_ARTICLES and corpus["n_categories"] == 5
    levels = corpus["levels"]
    assert set(levels) == {"theme", "subtheme", "family", "feature", "k-means K", "probe (ceiling)"}
    assert levels["subtheme"]["shown"] >= levels["theme"]["shown"]  # sub-themes nest in the themes
    for values in levels.values():
        assert fraction(values["best_f1"]) and fraction(values["purity"]) and fraction(values["coverage"])
    assert 3 <= levels["theme"]["shown"] <= quality.MAX_THEMES
    assert levels["theme"]["coverage"] == 1.0  # every document with an active feature has a theme
    assert len(corpus["theme_labels"]) == levels["theme"]["shown"]
    assert levels["k-means K"]["shown"] == 5
    assert levels["probe (ceiling)"]["best_f1"] > 0.8  # 200 BBC articles, 5 well separated desks
    for level in ("theme", "feature"):
        assert levels[level]["duplicate_labels"] == 0
        assert levels[level]["label_score"] > levels[level]["label_score_shuffled"]
    text = quality.markdown(result)
    assert "mean best-F1" in text and "theme best-F1 >= 0.95 x k-means K" in text


def test_placement_quick_places_added_articles_like_trained_ones_and_flags_foreign_ones(
    cache_dir: Path, quality_on_fewer_articles: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(placement, "QUICK_DOCS", FEWER_ARTICLES)
    embedded = []
    embed_dataset = pipeline.embed_dataset

    def embed_and_keep_the_summary(*args: object) -> object:
        embedded.append(embed_dataset(*args))
        return embedded[-1]

    monkeypatch.setattr(pipeline, "embed_dataset", embed_and_keep_the_summary)
    result = placement.run(cache_dir, quick=True, corpora=("bbc_news",))
    assert [summary.n_computed for summary in embedded] == [0, 0, 0]  # the quality benchmark's articles and vectors
    corpus = result["corpora"]["bbc_news"]
    assert corpus["n_documents"] == FEWER_ARTICLES and corpus["n_added"] == FEWER_ARTICLES // 5
    assert corpus["accuracy_trained"] >= 0.8
    assert corpus["accuracy_added"] >= corpus["accuracy_trained"] - 0.1  # placed about as well as trained
    assert not corpus["similar"]["retrain_advised"], corpus["similar"]["reasons"]
    foreign = corpus["foreign"]
    assert foreign["retrain_advised"] and foreign["no_fit_added"] > foreign["no_fit_before"] + 0.1
    assert corpus["place_seconds"] < corpus["train_seconds"]
    assert placement.TITLE in placement.markdown(result)


def test_app_latency_quick_times_both_apps_and_both_searches(cache_dir: Path) -> None:
    result = app_latency.run(quick=True, cache_dir=cache_dir)
    assert result["documents"] == app_latency.QUICK_DOCS and result["baseline"] == app_latency.BASELINE
    assert set(result["apps"]) == {"baseline", "prisma"}
    for app in result["apps"].values():
        assert len(app["first_paint_s"]) == 1 and positive(app["first_paint_s"][0])
        assert list(app["pages"]) == list(app_latency.PAGES)
        for summary in app["pages"].values():
            assert summary["visits"] == app_latency.QUICK_ROUNDS
            assert positive(summary["first_visit"]["done_s"])
            for measure in ("heading_s", "done_s"):
                assert positive(summary[measure]["p50"]) and summary[measure]["p50"] <= summary[measure]["p95"]
            assert summary["heading_s"]["p95"] <= summary["done_s"]["p95"]  # the heading shows before the run ends
    assert [s["rows"] for s in result["search"]] == [app_latency.QUICK_DOCS, app_latency.QUICK_SEARCH_ROWS]
    for searched in result["search"]:
        assert searched["recall_at_10"] == pytest.approx(1.0)  # below the index threshold both are exact
        assert positive(searched["numpy_p50_ms"]) and positive(searched["store_p50_ms"]) and positive(searched["ratio"])
    text = app_latency.markdown(result)
    assert "First paint of Home" in text and "LanceDB / numpy" in text


def test_each_side_of_a_speed_comparison_goes_first_in_turn() -> None:
    orders = [common.rotated(["prisma", "plain", "truncated"], number) for number in range(4)]
    assert [order[0] for order in orders] == ["prisma", "plain", "truncated", "prisma"]
    assert all(sorted(order) == ["plain", "prisma", "truncated"] for order in orders)
    assert [common.timed_rounds(True), common.timed_rounds(False), common.timed_rounds(False, 4)] == [1, 3, 4]


def test_cli_stage_seconds_are_parsed() -> None:
    stdout = "embedded 10 documents (m|bf16): 10 computed in 12 chunks, 0 from cache, 3.5 s, 1,234 tokens/s\n"
    stdout += "  seconds: train 4.5, analyse 1.2, families 0.3\n"
    assert end_to_end.stage_seconds(stdout) == {"embed": 3.5, "train": 4.5, "analyse": 1.2, "families": 0.3}


def test_render_lists_every_benchmark_even_before_it_ran(tmp_path: Path) -> None:
    common.write_result("search_quick", {"device": common.device_report()} | _fake_search(), tmp_path)
    text = run_all.render(quick=True, out_dir=tmp_path)
    for name in run_all.BENCHMARKS:
        assert run_all.module(name).TITLE in text
    assert text.count("Not run yet") == len(run_all.BENCHMARKS) - 1


def _fake_search() -> dict:
    latency = {"p50_ms": 1.0, "p95_ms": 2.0}
    return {
        "quick": True,
        "rows": 10,
        "dim": 4,
        "queries": 2,
        "index_min_rows": 100_000,
        "nprobes": 50,
        "refine": 10,
        "save_seconds": 0.1,
        "index_seconds": 0.2,
        "exact": latency,
        "flat": latency | {"recall_at_10": 1.0},
        "indexed": latency | {"recall_at_10": 0.5},
        "candidates": [],
    }


def test_the_app_memory_sampler_sums_the_children_of_a_process() -> None:
    """A child holding 200 MB counts in its parent's tree: the sampler sees what a memory-capped host counts."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; block = b'x' * (200 << 20); print(flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE,
    )
    try:
        holder.stdout.readline()  # the block is allocated and touched
        own = status_mb(os.getpid(), "VmRSS")
        assert holder.pid in process_tree(os.getpid())
        assert status_mb(holder.pid, "VmRSS") >= 200
        assert tree_rss_mb(os.getpid()) >= own + 200
        sampler = TreeSampler(os.getpid())
        with sampler.during("holding"):
            pass
        report = sampler.report()
        assert report["phases"][0]["phase"] == "holding" and report["peak_mb"] >= own + 200
        assert report["server_vm_hwm_mb"] >= own
    finally:
        holder.kill()
        holder.wait()
    assert holder.pid not in process_tree(os.getpid())


def test_gpu_benchmark_says_skipped_where_torch_sees_no_gpu() -> None:
    assert not gpu.cuda_available()  # this machine and CI have no GPU: the other branch runs on GPU machines only
    result = gpu.run(quick=True)
    assert result["skipped"] == "no GPU"
    assert result["device"]["device"] == "cpu"
    assert gpu.markdown(result).startswith("**skipped: no GPU**")


def test_scale_corpus_documents_draw_real_sentences_of_one_label(tmp_path: Path) -> None:
    path = tmp_path / "corpus.parquet"
    scale.write_corpus(path, 300)
    corpus = pd.read_parquet(path)
    assert len(corpus) == 300 and corpus["id"].is_unique
    bbc = " ".join(pd.read_parquet(common.bbc_path(), columns=["text"])["text"])
    first_bbc = next(text for text, label in zip(corpus["text"], corpus["label"], strict=True) if label == "topic 0")
    assert first_bbc.split(". ")[0] in bbc  # topic 0 is the first BBC label: its sentences are BBC's own
    assert corpus["label"].nunique() > 20  # BBC's 5, AG News' 4 and MTSamples' 40 labels are all drawn from


def test_scale_ingest_only_stops_after_ingest() -> None:
    result = scale.run(quick=True, n_docs=300, ingest_only=True)
    ingest = result["stages"]["ingest"]
    assert set(result["stages"]) == {"ingest"} and ingest["n_documents"] == 300 and positive(ingest["peak_mb"])
    assert result["corpus_mb"] > 0 and "| 300 |" in scale.markdown(result)


def test_scale_quick_times_and_measures_every_stage_in_its_own_process() -> None:
    result = scale.run(quick=True, n_docs=300, embed_sample=40, sae_flags=["n_features=64"])
    stages = result["stages"]
    sae = stages["run"]["sae"]
    assert sae["n_features"] == 64 and 0 < sae["n_latents"] <= 64  # as the command line set it; the kept ones
    assert result["documents"] == 300 and result["embed_sample"] == 40
    assert all(positive(stage["peak_mb"]) for stage in stages.values())
    assert positive(stages["embed"]["tokens_per_s"]) and stages["embed"]["extrapolated_seconds"] > 0
    assert stages["embed"]["all_stored"]  # through the product's embedding path, a window at a time
    assert {"train", "analyse", "themes", "families"} <= set(stages["run"]["peak_mb_by_part"])
    assert set(stages["run"]["seconds"]) == {"train", "analyse", "themes", "families"}
    assert stages["run"]["sae"]["epochs"] == 2 and fraction(stages["run"]["fvu_holdout"])
    assert "Peak resident memory of any stage" in scale.markdown(result)


def test_ray_scaling_quick_embeds_the_same_vectors_on_every_path(few_speed_documents: int) -> None:
    """Local, 1 and 2 Ray workers on a head node the benchmark starts and stops: the same vectors on every path."""
    result = ray_scaling.run(quick=True)
    paths = result["paths"]
    assert set(paths) == set(ray_scaling.PATHS) and result["cluster"]["started_here"]
    assert result["documents"] == few_speed_documents and result["content_tokens"] > 0
    for name, summary in paths.items():
        assert positive(summary["tokens_per_s"]) and summary["cosine_to_local_min"] >= 0.9999
        assert summary["tokens_per_s"] * common.median(summary["seconds"]) == pytest.approx(result["content_tokens"])
        assert all(positive(s) for s in summary["start_seconds"]) or name == "local"
    one, two, local = (paths[name]["seconds"] for name in ("ray, 1 worker", "ray, 2 workers", "local"))
    assert result["round_ratios_2_over_1"] == pytest.approx([a / b for a, b in zip(one, two, strict=True)])
    assert result["round_ratios_2_over_local"] == pytest.approx([a / b for a, b in zip(local, two, strict=True)])
    two_over_one = paths["ray, 2 workers"]["tokens_per_s"] / paths["ray, 1 worker"]["tokens_per_s"]
    assert f"2 workers / 1 worker: {two_over_one:.2f}x" in ray_scaling.markdown(result)


def test_report_quick_writes_the_report_at_two_levels_and_times_its_parts() -> None:
    result = report.run(quick=True, n_docs=150, embed_sample=20)
    for level in ("theme", "feature"):
        timed = result["reports"][level]
        assert positive(timed["seconds"]) and positive(timed["cpu_seconds"]) and 0 < timed["mb"] < report.TARGET_MB
    parts = result["parts"]["seconds"]
    assert {"read the run", "gather (the map)", "section: comparison", "section: themes"} <= set(parts)
    assert all(positive(seconds) for seconds in parts.values())
    assert result["parts"]["map_points"] == 150 and result["parts"]["n_groups"] >= 2
    worst_mb = max(timed["mb"] for timed in result["reports"].values())
    text = report.markdown(result)
    assert f"Largest file: **{worst_mb:.1f} MB** (target <= {report.TARGET_MB:.0f} MB): **met** (a smaller run)" in text
    cpu_met = result["reports"]["theme"]["cpu_seconds"] < report.TARGET_SECONDS
    assert f"**{verdict(cpu_met)}** (a smaller run)" in text.split("The default report")[1]
    assert "| features |" in text


def test_trends_quick_finds_the_planted_changes_and_almost_nothing_on_shuffled_dates(cache_dir: Path) -> None:
    """600 BBC articles from the shared cached vectors (none embedded), the two largest themes planted to rise (3x
    and 1.67x from the first month to the last), the third to fall: the strong rise and the fall are found in every
    planting with about their planted size, flat themes are not reported, and shuffled dates find a change in no more
    analyses than Benjamini-Hochberg allows."""
    result = trends.run(cache_dir, quick=True)
    found = trends.summary(result)
    assert result["n_documents"] == trends.QUICK_DOCS and len(result["plantings"]) == trends.QUICK_PLANTINGS
    strong = int(max(result["rising"], key=result["rising"].get))
    for theme in (strong, result["falling"]):
        entry = found["themes"][theme]
        assert entry["recovered"] == 1.0
        assert abs(entry["measured_change"] - entry["planted_change"]) < 0.06
    assert found["flat_theme_reports"] <= 1
    analyses = found["shuffled_analyses"]
    assert analyses == trends.QUICK_DRAWS * len(trends.LEVELS)
    assert found["shuffled_rate"] * analyses <= stats.binom.ppf(0.999, analyses, 0.05)
    met = found["shuffled_rate"] <= 0.05
    assert f"(target <= 5%): **{verdict(met)}**" in trends.markdown(result)


BACKEND_ARTICLES = 60
"""bench.backends' test embeds this many BBC articles three times (fp32, bf16, int8) and trains four runs on them."""


def test_backends_quick_compares_the_themes_of_each_precision_with_fp32(cache_dir: Path) -> None:
    result = backends.run(["bbc_news"], cache_dir, BACKEND_ARTICLES)
    corpus = result["corpora"]["bbc_news"]
    assert corpus["n_documents"] == BACKEND_ARTICLES
    assert corpus["spaces"] == {p: model_key(at_precision(EmbedConfig(), p)) for p in backends.PRECISIONS}
    assert len(set(corpus["spaces"].values())) == 3  # three vector spaces, each embedded for real
    assert corpus["auto"]["precision"] in backends.PRECISIONS and corpus["auto"]["reason"]
    noise, fast = f"fp32 seed {backends.NOISE_SEED}", ("bf16", "int8")
    assert list(corpus["compared"]) == [noise, *fast]
    assert corpus["compared"][noise]["cosine_min"] == pytest.approx(1.0)  # the same vectors, another seed
    for side, found in corpus["compared"].items():
        assert COSINE_FLOOR <= found["cosine_mean"] <= 1.0 + 1e-6 and found["cosine_min"] <= found["cosine_mean"]
        assert -0.5 <= found["subtheme_ari"] <= 1.0 + 1e-9
        assert fraction(found["recurring"]) and fraction(found["recurring_by_documents"])
        assert found["themes"] >= 2 and found["subthemes"] >= found["themes"]
        assert found["theme_ari"] > 0.5, side  # the same broad desks, whatever moved
    worst = min(corpus["compared"][side]["theme_ari"] for side in fast)
    assert backends.worst_backend_ari(corpus) == worst
    text = backends.markdown(result)
    assert len([line for line in text.splitlines() if line.startswith(f"| bbc_news ({BACKEND_ARTICLES})")]) == 3
    assert f"{worst:.3f} (fp32 seed against seed" in text
    assert f"target >= {backends.TARGET_THEME_ARI}: **{verdict(worst >= backends.TARGET_THEME_ARI)}**" in text
