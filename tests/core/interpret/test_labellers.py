"""Every labelling job labels with the `Labeller` it is given, built by the pipeline's one factory
(`pipeline.labelling.labellers`): keywords and an Ollama model behind the same contract."""

from dataclasses import asdict

import pandas as pd
import scipy.sparse as sp
from labelling_run import active_features, interpretations, labeller, ollama, run_codes

from prisma_core import pipeline
from prisma_core.concepts import analysis
from prisma_core.interpret.keyword_labeller import KEYWORD_VERSION, KeywordLabeller
from prisma_core.interpret.keywords import KEYWORD_SOURCE
from prisma_core.interpret.labeller import LabelRequest
from prisma_core.interpret.ollama_labeller import OllamaLabeller
from prisma_core.pipeline.labelling import (
    LabelConfig,
    LabelScope,
    label_groups,
    label_run,
    label_scope,
    open_labeller,
    run_keyword_labeller,
)


def test_a_keyword_labeller_given_to_a_job_labels_with_keywords_and_asks_no_server(workspace, base_run, fake):
    run = pipeline.load_run(workspace, base_run.run_id)
    features = active_features(workspace, base_run.run_id, 4)
    keywords = run_keyword_labeller(workspace, run)
    before = interpretations(workspace, base_run.run_id)

    summary = label_run(workspace, run, keywords, LabelConfig(relabel=True), feature_ids=features)

    assert (summary.model, summary.host, summary.n_labelled, summary.n_failed) == (KEYWORD_SOURCE, "", 4, 0)
    assert fake.requests == []
    rows = interpretations(workspace, base_run.run_id)
    new = rows[~rows["interpretation_id"].isin(before["interpretation_id"])].sort_values("feature_id")
    assert new["feature_id"].tolist() == features
    assert (new["source"] == KEYWORD_SOURCE).all() and (new["prompt_version"] == KEYWORD_VERSION).all()
    codes = sp.csc_matrix(run_codes(workspace, base_run.run_id))
    n_top = run.settings.keywords.n_top_documents
    for row in new.itertuples():
        strongest = analysis.top_documents(codes, row.feature_id, n_top)["position"].to_numpy()
        expected = keywords.label(LabelRequest("feature", strongest))
        assert (row.label, row.description) == (expected.label, expected.description)
        texts = " ".join(base_run.corpus["text"][p].lower() for p in strongest)  # stored order: the corpus's
        assert all(word in texts for word in row.label.replace("·", " ").split())
    record = workspace.stage_records.of(run.record.dataset_id, base_run.run_id)[-1]
    assert (record.stage, record.config["kind"]) == ("labelling", "feature")
    assert record.config["keywords"] == asdict(run.settings.keywords) and "ollama" not in record.config


def test_a_keyword_labeller_skips_what_keywords_already_labelled(workspace, base_run, fake):
    run = pipeline.load_run(workspace, base_run.run_id)
    features = active_features(workspace, base_run.run_id, 4)
    before = interpretations(workspace, base_run.run_id)

    summary = label_run(workspace, run, run_keyword_labeller(workspace, run), feature_ids=features)

    assert (summary.n_labelled, summary.n_skipped) == (0, 4)  # training named every feature with keywords
    pd.testing.assert_frame_equal(interpretations(workspace, base_run.run_id), before)


def test_a_keyword_labeller_names_families(workspace, base_run, fake):
    run = pipeline.load_run(workspace, base_run.run_id)
    families = workspace.groups.families(base_run.run_id)[:3]

    summary = label_groups(
        workspace,
        run,
        "family",
        run_keyword_labeller(workspace, run),
        LabelConfig(relabel=True),
        group_ids=[family.family_id for family in families],
    )

    assert summary.model == KEYWORD_SOURCE and summary.n_labelled + len(summary.set_aside) == len(families)
    assert fake.requests == []
    after = {family.family_id: family for family in workspace.groups.families(base_run.run_id)}
    assert all(after[family.family_id].label_source == KEYWORD_SOURCE for family in families)


def test_open_labeller_builds_the_one_the_settings_name(workspace, base_run, fake):
    run = pipeline.load_run(workspace, base_run.run_id)
    with open_labeller(workspace, run, None) as keywords:
        assert isinstance(keywords, KeywordLabeller)
        assert keywords.config == run.settings.keywords and keywords.embed_config.model == run.settings.embed.model
    features = active_features(workspace, base_run.run_id, 3)
    with open_labeller(workspace, run, ollama(fake, n_evidence=3, n_contrast=2)) as model:
        assert isinstance(model, OllamaLabeller) and model.n_shown == (3, 2)
        summary = label_scope(workspace, run, model, LabelConfig(), LabelScope(features, (), ()))
    assert summary.features.n_labelled == 3 and summary.features.host == fake.url
    assert len(fake.user_prompts()) == 3  # every prompt reached the loopback server


def test_each_job_is_given_its_labeller_and_never_builds_another(workspace, base_run, fake):
    run = pipeline.load_run(workspace, base_run.run_id)
    features = active_features(workspace, base_run.run_id, 2)
    given = labeller(fake, model="mistral")
    fake.models = ["mistral:latest", "llama3.2:latest"]

    summary = label_run(workspace, run, given, feature_ids=features)

    assert summary.model == "mistral" and {request["model"] for request in fake.requests} == {"mistral"}
