"""A labelling batch that meets failures: malformed answers, failures in a row, a missing model, slow replies,
a refused connection, unknown features and a prompt injection; nothing made before is lost.
"""

import json
import time
from typing import Any

import pandas as pd
import pytest
from labelling_run import (
    active_features,
    document_vectors,
    evidence_of,
    interpretations,
    labelled_features,
    labeller,
    llm_rows,
    prefix,
    run_codes,
    shown_documents,
    store_snapshot,
)
from ollama_server import closed_port_url, derived_answer

from prisma_core import pipeline
from prisma_core.errors import LabellingError, NotFoundError
from prisma_core.interpret.ollama_config import OllamaConfig
from prisma_core.pipeline.labelling import LabelConfig, label_groups, label_run, ollama_labeller
from prisma_core.progress import Progress


def test_a_malformed_answer_fails_only_its_feature(workspace, base_run, fake):
    features = active_features(workspace, base_run.run_id, 4)
    fake.scripted.extend(["Sure! The label is: sport"] * 3)  # every attempt for the first feature

    summary = label_run(workspace, pipeline.load_run(workspace), labeller(fake, max_retries=2), feature_ids=features)

    assert (summary.n_labelled, summary.n_failed, summary.stop_reason) == (3, 1, "")
    assert summary.first_error.startswith(f"Feature {features[0]}: The model 'llama3.2' gave no usable answer in 3")
    assert llm_rows(workspace, base_run.run_id)["feature_id"].tolist() == features[1:]


def test_failures_in_a_row_stop_the_batch_and_lose_nothing(workspace, base_run, fake):
    streak = LabelConfig().max_consecutive_failures
    features = active_features(workspace, base_run.run_id, 2 + streak + 3)  # 2 labelled first, 3 never tried
    label_run(workspace, pipeline.load_run(workspace), labeller(fake), feature_ids=features[:2])
    before = interpretations(workspace, base_run.run_id)
    fake.responder = lambda request: '{"label": "unterminated'

    summary = label_run(workspace, pipeline.load_run(workspace), labeller(fake, max_retries=1), feature_ids=features)

    assert (summary.n_skipped, summary.n_labelled, summary.n_failed, summary.n_remaining) == (2, 0, streak, 3)
    assert summary.stop_reason.startswith(f"Stopped after {streak} failures in a row; the last one: Feature")
    assert len(fake.requests) == 2 + streak * 2
    pd.testing.assert_frame_equal(interpretations(workspace, base_run.run_id), before)


def test_an_unknown_model_raises_before_any_request_and_changes_nothing(workspace, base_run, fake):
    before = store_snapshot(workspace)
    with pytest.raises(LabellingError, match=r"'mistral-nope' is not available on .*available: llama3\.2:latest"):
        label_run(workspace, pipeline.load_run(workspace), labeller(fake, model="mistral-nope"))
    assert fake.requests == []
    after = store_snapshot(workspace)
    assert after == before


def test_a_model_removed_midway_stops_the_batch_after_the_failures_in_a_row(workspace, base_run, fake):
    features = active_features(workspace, base_run.run_id, 6)

    def remove_models(event: Progress) -> None:
        if event.done == 1:
            fake.models = []

    summary = label_run(
        workspace,
        pipeline.load_run(workspace),
        labeller(fake),
        LabelConfig(max_consecutive_failures=2),
        features,
        remove_models,
    )

    assert (summary.n_labelled, summary.n_failed, summary.n_remaining) == (1, 2, len(features) - 3)
    assert "'llama3.2' is not available" in summary.first_error
    assert llm_rows(workspace, base_run.run_id)["feature_id"].tolist() == features[:1]


def test_slow_replies_time_out_per_feature_within_the_timeout(workspace, base_run, fake):
    features = active_features(workspace, base_run.run_id, 5)
    before = interpretations(workspace, base_run.run_id)
    fake.delay_s = 30.0
    started = time.monotonic()

    summary = label_run(
        workspace,
        pipeline.load_run(workspace),
        labeller(fake, timeout_s=1.0),
        LabelConfig(max_consecutive_failures=2),
        features,
    )

    assert time.monotonic() - started < 2 * 1.0 + 5.0
    assert (summary.n_labelled, summary.n_failed, summary.n_remaining) == (0, 2, len(features) - 2)
    assert "did not answer within 1 s" in summary.first_error
    pd.testing.assert_frame_equal(interpretations(workspace, base_run.run_id), before)


def test_a_refused_connection_raises_one_plain_error_and_changes_nothing(workspace, base_run):
    before = store_snapshot(workspace)
    url = closed_port_url()
    with pytest.raises(LabellingError, match=f"Ollama is not reachable at {url}"):
        label_run(workspace, pipeline.load_run(workspace), ollama_labeller(OllamaConfig(host=url, timeout_s=2.0)))
    with pytest.raises(LabellingError, match="not reachable"):
        label_groups(
            workspace, pipeline.load_run(workspace), "family", ollama_labeller(OllamaConfig(host=url, timeout_s=2.0))
        )
    after = store_snapshot(workspace)
    assert after == before


def test_unknown_feature_ids_are_refused(workspace, fake):
    with pytest.raises(NotFoundError, match="no feature 384, 999"):
        label_run(workspace, pipeline.load_run(workspace), labeller(fake), feature_ids=[1, 384, 999])
    assert fake.requests == []


def test_a_prompt_injection_changes_only_the_label_of_the_features_it_is_evidence_for(workspace, base_run, fake):
    """The fake here obeys any injection it is shown, like the worst model would."""
    codes = run_codes(workspace, base_run.run_id)
    injected = prefix(base_run.corpus["text"][0])
    active = active_features(workspace, base_run.run_id)
    victims = [f for f in active if injected in evidence_of(codes, base_run.corpus, f)]
    bystanders = [f for f in active if f not in victims][:10]
    assert victims, "the injected article is evidence for no feature"

    def obeying(request: dict[str, Any]) -> str:
        if "HACKED" in request["messages"][-1]["content"]:
            return json.dumps({"label": "HACKED", "description": "'); DROP TABLE interpretations; --"})
        return derived_answer(request)

    fake.responder = obeying
    before = store_snapshot(workspace)
    vector_tables = [name for name in before if name.startswith("vectors__")]
    documents_before = {name: document_vectors(workspace, name) for name in vector_tables}
    old_rows = interpretations(workspace, base_run.run_id)

    label_run(workspace, pipeline.load_run(workspace), labeller(fake), feature_ids=victims + bystanders)

    after = store_snapshot(workspace)
    changed = {name for name in after if after[name] != before[name]}
    assert changed - set(vector_tables) == {"interpretations", "stages"}
    # the embedding cache gained the new labels' vectors (rows of no dataset); the documents' vectors are untouched
    assert all(document_vectors(workspace, name).equals(documents_before[name]) for name in vector_tables)
    newest = workspace.stage_records.of(workspace.run(base_run.run_id).dataset_id, base_run.run_id)[-1]
    assert (newest.stage, newest.parent_id) == ("labelling", base_run.run_id)  # the batch's record, nothing else
    rows = interpretations(workspace, base_run.run_id)
    kept = rows[rows["interpretation_id"].isin(old_rows["interpretation_id"])].reset_index(drop=True)
    pd.testing.assert_frame_equal(kept, old_rows)
    new = rows[~rows["interpretation_id"].isin(old_rows["interpretation_id"])].set_index("feature_id")
    assert sorted(new.index) == sorted(victims + bystanders)
    assert (new["source"] == "llama3.2").all()
    asked = labelled_features(fake, codes, base_run.corpus, victims + bystanders)
    shown_to = {
        feature
        for feature, prompt in zip(asked, fake.user_prompts(), strict=True)
        if injected in shown_documents(prompt, "evidence") | shown_documents(prompt, "contrast")
    }
    assert set(victims) <= shown_to and len(shown_to) < len(victims) + len(bystanders)
    assert set(new.index[new["label"] == "HACKED"]) == shown_to
    assert (new.loc[sorted(shown_to), "description"] == "'); DROP TABLE interpretations; --").all()
