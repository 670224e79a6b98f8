"""A labelling batch over a real run, against the loopback fake Ollama: what is stored, the evidence shown,
resume, cancel, and labels saved a few at a time.
"""

import json

import pandas as pd
import pytest
from labelling_run import (
    active_features,
    evidence_of,
    interpretations,
    labelled_features,
    labeller,
    llm_rows,
    prefix,
    run_codes,
    shown_documents,
    strong_documents,
)
from ollama_server import derived_answer

from prisma_core import pipeline
from prisma_core.interpret.keywords import KEYWORD_SOURCE
from prisma_core.interpret.label_scores import ScoreConfig, ranked_documents
from prisma_core.interpret.prompts import PROMPT_VERSION
from prisma_core.pipeline.labelling import LabelConfig, job, label_run
from prisma_core.progress import Progress


def test_labels_are_stored_with_model_prompt_version_and_an_embedding_score(workspace, base_run, fake):
    features = active_features(workspace, base_run.run_id, 6)
    keyword_rows = interpretations(workspace, base_run.run_id)
    events: list[Progress] = []

    summary = label_run(
        workspace, pipeline.load_run(workspace), labeller(fake), feature_ids=features, progress=events.append
    )

    assert (summary.n_labelled, summary.n_failed, summary.n_skipped, summary.n_remaining) == (6, 0, 0, 0)
    assert (summary.model, summary.host, summary.stop_reason, summary.errors) == ("llama3.2", fake.url, "", [])
    rows = llm_rows(workspace, base_run.run_id)
    assert rows["feature_id"].tolist() == features
    assert (rows["prompt_version"] == PROMPT_VERSION).all()
    expected = {json.loads(derived_answer(request))["label"] for request in fake.requests}
    assert set(rows["label"]) == expected
    assert rows["description"].str.startswith("Documents about ").all()
    n_strong = strong_documents(workspace, base_run.run_id)
    scored = rows["score_embedding"].notna()
    assert scored.tolist() == [n_strong[f] >= ScoreConfig().min_positives for f in features]
    assert rows.loc[scored, "score_embedding"].between(0, 1).all()
    after = interpretations(workspace, base_run.run_id)
    pd.testing.assert_frame_equal(after[after["source"] == KEYWORD_SOURCE].reset_index(drop=True), keyword_rows)
    assert events[-1] == Progress("label", 6, 6, f"feature {features[-1]}: {rows['label'].iloc[-1]}")


def test_evidence_is_the_top_documents_and_contrast_never_activates(workspace, base_run, fake):
    feature = max(
        active_features(workspace, base_run.run_id), key=workspace.feature_stats.of(base_run.run_id)["density"].get
    )
    codes = run_codes(workspace, base_run.run_id)
    label_run(
        workspace,
        pipeline.load_run(workspace, base_run.run_id),
        labeller(fake, n_evidence=4, n_contrast=6),
        feature_ids=[feature],
    )

    [prompt] = fake.user_prompts()
    assert shown_documents(prompt, "evidence") == evidence_of(codes, base_run.corpus, feature, n=4)
    contrast = shown_documents(prompt, "contrast")
    active = {prefix(base_run.corpus["text"][p]) for p in ranked_documents(codes, feature)}
    assert len(contrast) == 6 and not contrast & active


def test_resume_sends_no_request_for_features_already_labelled(workspace, base_run, fake):
    first, second = active_features(workspace, base_run.run_id, 3), active_features(workspace, base_run.run_id)[3:6]
    codes = run_codes(workspace, base_run.run_id)
    label_run(workspace, pipeline.load_run(workspace), labeller(fake), feature_ids=first)
    fake.requests.clear()

    summary = label_run(
        workspace, pipeline.load_run(workspace), labeller(fake, model="llama3.2:latest"), feature_ids=first + second
    )

    assert (summary.n_skipped, summary.n_labelled) == (3, 3)
    assert labelled_features(fake, codes, base_run.corpus, first + second) == second
    assert llm_rows(workspace, base_run.run_id)["feature_id"].tolist() == first + second
    fake.requests.clear()
    other_model = label_run(
        workspace, pipeline.load_run(workspace), labeller(fake, model="qwen2.5:0.5b"), feature_ids=first
    )
    again = label_run(
        workspace, pipeline.load_run(workspace), labeller(fake), LabelConfig(relabel=True), feature_ids=first[:1]
    )
    assert (other_model.n_labelled, other_model.n_skipped, again.n_labelled) == (3, 0, 1)
    assert len(fake.requests) == 4


def test_cancel_midway_keeps_every_label_made_and_a_rerun_finishes(workspace, base_run, fake):
    features = active_features(workspace, base_run.run_id, 6)
    done: list[Progress] = []

    summary = label_run(
        workspace,
        pipeline.load_run(workspace),
        labeller(fake),
        feature_ids=features,
        progress=done.append,
        should_stop=lambda: len(done) > 2,
    )

    assert (summary.n_labelled, summary.n_remaining) == (2, 4)
    assert summary.stop_reason.startswith("Cancelled after 2 of 6")
    assert llm_rows(workspace, base_run.run_id)["feature_id"].tolist() == features[:2]
    rest = label_run(workspace, pipeline.load_run(workspace), labeller(fake), feature_ids=features)
    assert (rest.n_skipped, rest.n_labelled) == (2, 4)
    assert len(fake.requests) == 6


def test_labels_are_stored_a_few_at_a_time_and_the_table_is_compacted(workspace, base_run, fake, monkeypatch):
    """One commit per label made the table's history (and LanceDB's cache of it in the app) grow with the square of
    the labels; labels are now written SAVE_EVERY at a time and the table compacted after the batch."""
    features = active_features(workspace, base_run.run_id, 2 * job.SAVE_EVERY + 1)  # two full writes and one more
    writes: list[list[int]] = []
    add = workspace.labels.add
    monkeypatch.setattr(
        workspace.labels,
        "add",
        lambda run_id, rows: (writes.append([r["feature_id"] for r in rows]), add(run_id, rows)),
    )

    summary = label_run(workspace, pipeline.load_run(workspace), labeller(fake), feature_ids=features)

    every = job.SAVE_EVERY
    assert summary.n_labelled == len(features)
    assert writes == [features[:every], features[every : 2 * every], features[2 * every :]]
    stored = llm_rows(workspace, base_run.run_id)
    assert stored["feature_id"].tolist() == features and stored["score_embedding"].notna().any()
    stats = workspace.db.open_table("interpretations").stats()
    assert stats["fragment_stats"]["num_fragments"] == 1 and stats["num_rows"] == len(
        workspace.labels.of(base_run.run_id)
    )


def test_labels_wait_at_most_save_seconds_and_an_error_midway_keeps_those_made(workspace, base_run, fake, monkeypatch):
    features = active_features(workspace, base_run.run_id, 5)
    writes: list[int] = []
    add = workspace.labels.add
    monkeypatch.setattr(workspace.labels, "add", lambda run_id, rows: (writes.append(len(rows)), add(run_id, rows)))
    monkeypatch.setattr(job, "SAVE_SECONDS", 0.0)  # a slow model: every label is due as soon as it is made
    label_run(workspace, pipeline.load_run(workspace), labeller(fake), feature_ids=features[:2])
    assert writes == [1, 1]

    monkeypatch.setattr(job, "SAVE_SECONDS", 3600.0)
    events: list[Progress] = []

    def stop_with_an_error() -> bool:
        if len(events) > 2:
            raise RuntimeError("the app was shut down")
        return False

    with pytest.raises(RuntimeError, match="shut down"):
        label_run(
            workspace,
            pipeline.load_run(workspace),
            labeller(fake),
            feature_ids=features,
            progress=events.append,
            should_stop=stop_with_an_error,
        )
    assert writes == [1, 1, 2]  # the two labels made before the error, in one write as the batch unwound
    assert llm_rows(workspace, base_run.run_id)["feature_id"].tolist() == features[:4]
