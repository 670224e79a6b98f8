"""How well a label fits its feature: embedding and detection scores, their bands and verdicts, the shuffled
baseline.
"""

import json
import re
import shutil
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from labelling_run import (
    DOCUMENT,
    N_DOCUMENTS,
    PREFIX,
    BaseRun,
    block,
    labeller,
    prefix,
    run_codes,
    shown_documents,
    strong_documents,
)
from sklearn.metrics import roc_auc_score

from prisma_core import pipeline
from prisma_core.concepts import analysis
from prisma_core.interpret.keywords import KEYWORD_SOURCE
from prisma_core.interpret.label_scores import (
    ScoreConfig,
    auc_band,
    detection_band,
    ranked_documents,
    roc_auc,
    score_support,
    scoring_documents,
    verdict,
)
from prisma_core.interpret.prompts import PROMPT_VERSION
from prisma_core.pipeline.labelling import label_quality, score_baseline, score_run
from prisma_core.store import Workspace, now_iso


def plant_run(
    workspace: Workspace, base_run: BaseRun, active_on: dict[int, np.ndarray], labels: list[dict[str, Any]]
) -> str:
    """A run whose features fire exactly on the given documents, labelled as given (same SAE weights)."""
    record = workspace.run(base_run.run_id)
    rows = np.concatenate(list(active_on.values()))
    columns = np.concatenate([np.full(len(docs), feature) for feature, docs in active_on.items()])
    values = np.random.default_rng(0).uniform(1.0, 2.0, len(rows)).astype(np.float32)
    n_features = len(workspace.feature_stats.of(base_run.run_id))
    codes = sp.csr_matrix((values, (rows, columns)), shape=(N_DOCUMENTS, n_features))
    run_id, _ = workspace.new_run_dir()
    coo = codes.tocoo()
    workspace.activations.save(run_id, coo.row, coo.col, coo.data)
    workspace.feature_stats.save(run_id, analysis.feature_stats(codes).assign(found_in=3))
    workspace.labels.add(run_id, labels)
    config = record.config | {"keywords": {"n_top_documents": 1}}  # the scores show the tests' own documents
    workspace.add_run(replace(record, run_id=run_id, created_at=now_iso(), config=config))
    return run_id


def perfect_detector(corpus: pd.DataFrame):
    """Flags exactly the documents whose BBC section is the concept label."""
    section_of = {prefix(text): label for text, label in zip(corpus["text"], corpus["label"], strict=True)}

    def answer(request: dict[str, Any]) -> str:
        prompt = request["messages"][-1]["content"]
        concept = re.search(r"<concept>\s*<label>(.*?)</label>", prompt).group(1)
        bodies = DOCUMENT.findall(block(prompt, "documents"))
        return json.dumps({"matches": [i for i, body in enumerate(bodies, 1) if section_of[body[:PREFIX]] == concept]})

    return answer


def test_scores_are_high_for_the_true_topic_and_near_chance_for_a_random_feature(workspace, base_run, fake):
    sport = np.flatnonzero(base_run.corpus["label"] == "sport")
    random_documents = np.random.default_rng(1).choice(N_DOCUMENTS, 40, replace=False)
    llm = {"source": "llama3.2", "prompt_version": PROMPT_VERSION}
    run_id = plant_run(
        workspace,
        base_run,
        {0: sport, 1: random_documents},
        [
            {"feature_id": 0, "label": "sport", **llm},
            {"feature_id": 1, "label": "sport", **llm},
            {"feature_id": 0, "label": "sport", "source": KEYWORD_SOURCE},
        ],
    )
    fake.responder = perfect_detector(base_run.corpus)
    config = ScoreConfig(n_shown=8, n_detect_positives=20, n_detect_negatives=20)

    run = pipeline.load_run(workspace, run_id)
    first = score_run(workspace, run, config, detect_with=labeller(fake), feature_ids=[0])

    assert (first.n_embedding, first.n_held_out, first.n_detection, first.n_detection_failed) == (2, 2, 1, 0)
    [prompt] = fake.user_prompts()
    strongest = {prefix(base_run.corpus["text"][p]) for p in ranked_documents(run_codes(workspace, run_id), 0)[:8]}
    assert len(DOCUMENT.findall(prompt)) == len(sport) - 8 + 20  # every held-out sport article, 20 others
    assert not strongest & shown_documents(prompt, "documents")
    second = score_run(workspace, run, config, detect_with=labeller(fake))
    assert (second.n_embedding, second.n_detection) == (1, 1)
    rows = workspace.labels.of(run_id).set_index(["feature_id", "source"])
    planted, chance, keywords = rows.loc[(0, "llama3.2")], rows.loc[(1, "llama3.2")], rows.loc[(0, KEYWORD_SOURCE)]
    assert planted["score_embedding"] > 0.8 and planted["score_detection"] == 1.0
    assert abs(chance["score_embedding"] - 0.5) < 0.15 and abs(chance["score_detection"] - 0.5) < 0.2
    assert keywords["score_embedding"] == planted["score_embedding"]  # same label, same documents
    assert np.isnan(keywords["score_detection"])  # keyword labels are not sent to the LLM by default

    fake.requests.clear()
    again = score_run(workspace, run, config, detect_with=labeller(fake))
    assert (again.n_embedding, again.n_detection, fake.requests) == (0, 0, [])
    quality = label_quality(workspace, run_id).set_index("source")
    assert quality.loc["llama3.2", ["n_labels", "n_scored", "n_detected"]].tolist() == [2, 2, 2]


def test_the_fast_roc_auc_equals_sklearns():
    rng = np.random.default_rng(0)
    label, positive, negative = rng.normal(size=8), rng.normal(size=(30, 8)) + 0.3, rng.normal(size=(50, 8))
    cosine = [positive @ label / np.linalg.norm(positive, axis=1), negative @ label / np.linalg.norm(negative, axis=1)]
    reference = roc_auc_score(np.r_[np.ones(30), np.zeros(50)], np.concatenate(cosine))
    assert roc_auc(*cosine) == pytest.approx(reference, abs=1e-12)
    assert roc_auc(np.array([1.0, 1.0]), np.array([1.0, 0.0])) == 0.75  # ties count half


def test_scoring_documents_hold_out_what_labellers_saw_and_fall_back_when_too_few():
    values = np.r_[np.linspace(3.0, 1.0, 30), np.linspace(3.0, 1.0, 6), [1.0, 0.5]]
    rows = np.r_[np.arange(30), np.arange(6), [0, 1]]
    columns = np.r_[np.zeros(30), np.ones(6), [2, 2]].astype(int)
    codes = sp.csc_matrix((values, (rows, columns)), shape=(100, 3))
    config = ScoreConfig(n_shown=20, min_positives=5, n_negatives=50)

    held_out, in_sample, too_few = (scoring_documents(codes, f, config) for f in range(3))

    assert held_out.basis == "held_out" and sorted(held_out.positives) == list(range(20, 30))
    assert in_sample.basis == "in_sample" and sorted(in_sample.positives) == list(range(6))
    assert too_few.basis == "too_few" and len(too_few.positives) == 0
    assert len(held_out.negatives) == 50 and min(held_out.negatives) >= 30
    again = scoring_documents(codes, 0, config)
    assert again.positives.tolist() == held_out.positives.tolist()
    assert again.negatives.tolist() == held_out.negatives.tolist()


def test_keyword_labels_carry_an_embedding_score_from_training(workspace, base_run):
    rows = workspace.labels.of(base_run.run_id)
    n_strong = strong_documents(workspace, base_run.run_id)
    keyword = rows[rows["source"] == KEYWORD_SOURCE].set_index("feature_id")
    scoreable = n_strong[keyword.index] >= ScoreConfig().min_positives
    assert keyword["score_embedding"].notna().tolist() == scoreable.tolist()
    assert scoreable.sum() >= 10
    assert keyword["score_embedding"].dropna().between(0, 1).all()
    assert keyword["score_embedding"].mean() > 0.7


def test_score_support_counts_the_documents_scoring_documents_draws(workspace, base_run):
    codes = run_codes(workspace, base_run.run_id)
    density = np.diff(codes.indptr)
    config = ScoreConfig(n_shown=5, n_negatives=60)
    support = score_support(density, N_DOCUMENTS, config)
    for feature in range(codes.shape[1]):
        drawn = scoring_documents(codes, feature, config)
        assert support.basis[feature] == drawn.basis
        assert support.n_positives[feature] == len(drawn.positives)
        assert support.n_negatives[feature] == (len(drawn.negatives) if drawn.basis != "too_few" else 0)
    assert {"held_out", "in_sample", "too_few"} <= set(support.basis)


def test_bands_narrow_with_more_documents_and_verdicts_read_against_chance():
    few, many = auc_band(0.7, 10, 20), auc_band(0.7, 200, 500)
    assert few[0] < many[0] < 0.7 < many[1] < few[1]
    assert verdict(*few) == "at chance" and verdict(*many) == "above chance"
    assert verdict(*auc_band(0.2, 200, 500)) == "below chance"
    assert auc_band(1.0, 50, 50)[1] == 1.0 and auc_band(1.0, 50, 50)[0] < 1.0
    assert np.isnan(auc_band(float("nan"), 10, 10)[0])
    low, high = detection_band(0.9, 5, 5)
    assert (round(low, 2), high) == (0.59, 1.0) and verdict(low, high) == "above chance"
    assert verdict(*detection_band(0.7, 5, 5)) == "at chance"


def test_the_shuffled_baseline_sits_near_chance_below_the_real_labels(workspace, base_run):
    baseline = score_baseline(workspace, pipeline.load_run(workspace, base_run.run_id))
    assert baseline.n_scored > 10 and baseline.n_too_few > 0
    assert baseline.mean_score > baseline.shuffled_mean + 0.1
    # scores lie in [0, 1], so the mean of n of them at chance has a standard deviation of at most 0.5 / sqrt(n):
    # the shuffled mean stays within two of them (19 labels here: 0.23; 0.37 to 0.63 on the numeric paths tried)
    assert abs(baseline.shuffled_mean - 0.5) < 1 / np.sqrt(baseline.n_scored)


def test_scoring_uses_the_run_the_caller_loaded_and_counts_labels_added_since(
    workspace, base_run, monkeypatch, tmp_path
):
    """The run's codes are read once, by the caller: scoring and the baseline never load the run again, yet the
    baseline counts the LLM labels named and scored after the run was loaded. The values are those the scores give
    on a copy of the workspace where they load the run themselves."""
    run = pipeline.load_run(workspace, base_run.run_id)
    dense = run.features.sort_values("density", ascending=False)["feature_id"].head(5).tolist()
    sections = ["sport", "business", "politics", "tech", "entertainment"]
    llm = {"source": "llama3.2", "prompt_version": PROMPT_VERSION}
    labels = [{"feature_id": f, "label": s, **llm} for f, s in zip(dense, sections, strict=True)]
    fresh = Workspace(shutil.copytree(workspace.path, tmp_path / "fresh"))
    fresh.labels.add(base_run.run_id, labels)
    expected_before = score_baseline(fresh, pipeline.load_run(fresh, base_run.run_id))
    expected = score_run(fresh, pipeline.load_run(fresh, base_run.run_id))
    workspace.labels.add(base_run.run_id, labels)

    def no_second_load(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the run was loaded again")

    monkeypatch.setattr("prisma_core.reading.runs.load_run", no_second_load)
    monkeypatch.setattr("prisma_core.pipeline.load_run", no_second_load)
    before = score_baseline(workspace, run)
    summary = score_run(workspace, run)

    assert before == expected_before and before.n_too_few > 0
    assert summary.n_embedding == 5 and summary.n_held_out + summary.n_in_sample == 5
    assert summary == expected
    rows = workspace.labels.of(base_run.run_id).query("source == 'llama3.2'").set_index("feature_id")
    stored = fresh.labels.of(base_run.run_id).query("source == 'llama3.2'").set_index("feature_id")
    assert sorted(rows.index) == sorted(dense)
    assert rows["score_embedding"].to_dict() == pytest.approx(stored["score_embedding"].to_dict())
