"""A labelling plan counts what a batch will ask before asking, and a batch reads only the texts it shows."""

import numpy as np
from labelling_run import active_features, labeller, ollama, prefix, run_codes, shown_documents

from prisma_core import pipeline
from prisma_core.concepts import analysis
from prisma_core.interpret.prompts import CHARS_PER_TOKEN
from prisma_core.pipeline.labelling import (
    PROMPT_OVERHEAD_TOKENS,
    group_documents,
    label_groups,
    label_run,
    plan_labels,
    planning,
)
from prisma_core.store import Workspace
from prisma_core.store.datasets import SHOWN_COLUMNS


def test_the_plan_counts_what_a_batch_will_ask_before_asking(workspace, base_run, fake):
    run = pipeline.load_run(workspace, base_run.run_id)
    active = active_features(workspace, base_run.run_id)
    label_run(workspace, pipeline.load_run(workspace), labeller(fake), feature_ids=active[:4])
    fake.requests.clear()

    plan = plan_labels(workspace, run, ollama(fake), feature_ids=None, family_ids=None)

    assert (plan.n_features, plan.n_features_skipped) == (len(active) - 4, 4)
    assert plan.n_families == len(run.families) and plan.n_inactive == len(run.features) - len(active)
    assert plan.prompt_tokens > plan.n_requests * 300 and not fake.requests


def test_the_plan_estimates_prompts_from_the_first_documents_without_reading_every_text(
    workspace, base_run, fake, monkeypatch
):
    run = pipeline.load_run(workspace, base_run.run_id)
    documents = Workspace.documents
    text_reads: list[object] = []

    def counted_documents(self, dataset_id, columns=None):
        text_reads.extend([columns] if "text" in (columns or ["text"]) else [])
        return documents(self, dataset_id, columns)

    monkeypatch.setattr(Workspace, "documents", counted_documents)
    config = ollama(fake, n_evidence=4, n_contrast=6)
    plan = plan_labels(workspace, run, config, feature_ids=None, family_ids=[], theme_ids=[])

    first = base_run.corpus["text"].head(planning.PROMPT_SAMPLE)
    document_tokens = min(config.max_doc_tokens, int(first.str.len().mean() / CHARS_PER_TOKEN))
    per_request = PROMPT_OVERHEAD_TOKENS + 10 * document_tokens
    assert plan.prompt_tokens == per_request * plan.n_features and not text_reads


def test_labelling_reads_only_the_texts_it_shows_the_model(workspace, base_run, fake, monkeypatch):
    features = active_features(workspace, base_run.run_id, 3)
    codes = run_codes(workspace, base_run.run_id)
    families = workspace.groups.families(base_run.run_id)
    whole_reads: list[object] = []
    kept: list[np.ndarray] = []
    documents, documents_at = Workspace.documents, Workspace.documents_at

    def counted_documents(self, dataset_id, columns=None):
        whole_reads.append(columns)
        return documents(self, dataset_id, columns)

    def counted_documents_at(self, dataset_id, positions, columns=SHOWN_COLUMNS):
        kept.append(np.asarray(positions))
        return documents_at(self, dataset_id, positions, columns)

    monkeypatch.setattr(Workspace, "documents", counted_documents)
    monkeypatch.setattr(Workspace, "documents_at", counted_documents_at)
    run = pipeline.load_run(workspace, base_run.run_id)
    label_run(workspace, run, labeller(fake, n_evidence=4, n_contrast=6), feature_ids=features)
    feature_reads = len(kept)
    label_groups(
        workspace, pipeline.load_run(workspace, base_run.run_id), "family", labeller(fake, n_evidence=4, n_contrast=6)
    )

    assert not [columns for columns in whole_reads if "text" in (columns or ["text"])]
    feature_positions = np.concatenate(kept[:feature_reads])
    (family_positions,) = kept[feature_reads:]
    shown = {
        int(p)
        for f in features
        for p in [*analysis.top_documents(codes, f, 4)["position"], *analysis.zero_documents(codes, f, 6, seed=f)]
    }
    quoted = set(pipeline.feature_evidence(workspace, run).query("feature_id in @features")["position"].tolist())
    assert set(feature_positions.tolist()) == shown | quoted  # the documents shown, and those its passages come from
    placed = [group_documents(codes, family.members, 4, 6, seed=0) for family in families]
    assert set(family_positions.tolist()) == {int(p) for pair in placed for part in pair for p in part}
    prompts = fake.user_prompts()
    assert len(prompts) == len(features) + len(families)
    for prompt, (evidence, _) in zip(prompts[len(features) :], placed, strict=True):
        assert shown_documents(prompt, "evidence") == {prefix(base_run.corpus["text"][p]) for p in evidence}
