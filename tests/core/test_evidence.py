"""Evidence passages on the small real run (60 BBC articles, real model, LanceDB and torch training): each feature's
strongest passages, one per document, found at training, stored and deleted with the run, found on demand for a run
trained before they were kept, a document's passages with their features, and the labelling prompt showing them."""

import numpy as np
import pandas as pd
import pytest
from markupsafe import escape
from ollama_server import running_fake_ollama
from report_page import Page
from small_run import PER_CATEGORY

from prisma_core import pipeline
from prisma_core.concepts.evidence import EVIDENCE_PASSAGES, QUOTE_CHARS, marked_pieces
from prisma_core.interpret.ollama_config import OllamaConfig
from prisma_core.interpret.prompts import neutralise_markup
from prisma_core.names import snippet
from prisma_core.pipeline.labelling import label_run, ollama_labeller
from prisma_core.pipeline.report.config import ReportConfig
from prisma_core.pipeline.report.contents import EVIDENCE_QUOTES, evidence_features
from prisma_core.pipeline.report.writer import report_html
from prisma_core.sae.weights import read_weights
from prisma_core.store import Workspace

SCRIPT = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def workspace(small_run) -> Workspace:
    return Workspace(small_run.path)


@pytest.fixture(scope="module")
def run(workspace, small_run):
    return pipeline.load_run(workspace, small_run.run.run_id)


def expected_top(workspace: Workspace, run) -> dict[int, list[tuple[int, float]]]:
    """Recomputed from scratch: every passage encoded as the SAE defines it (ReLU then the k largest), each
    feature's strongest passage per document, its EVIDENCE_PASSAGES strongest documents."""
    found = pipeline.passages(workspace, run.record.dataset_id)
    weights = read_weights(run.weights)
    pre = np.maximum((found.vectors - weights.b_pre) @ weights.W_enc.T + weights.b_enc, 0)
    kth = -np.sort(-pre, axis=1)[:, weights.config.k - 1 : weights.config.k]
    codes = np.where(pre >= kth, pre, 0)
    frame = pd.DataFrame(codes).assign(position=found.position)
    best = frame.groupby("position").max()  # [documents, features]: the feature's strongest passage per document
    top = {}
    for feature in range(weights.n_latents):
        column = best[feature][best[feature] > 0].sort_values(ascending=False, kind="stable")
        top[feature] = list(zip(column.index[:EVIDENCE_PASSAGES], column.to_numpy()[:EVIDENCE_PASSAGES], strict=True))
    return top


def test_each_feature_keeps_its_strongest_passages_one_per_document(workspace, run):
    stored = workspace.evidence.of(run.record.run_id)
    assert stored is not None  # found at training
    expected = expected_top(workspace, run)
    assert sum(len(top) for top in expected.values()) == len(stored) > 0
    for feature, top in expected.items():
        mine = stored[stored["feature_id"] == feature].sort_values("rank")
        assert mine["rank"].tolist() == list(range(len(top)))
        assert mine["position"].is_unique
        assert mine["value"].is_monotonic_decreasing
        np.testing.assert_allclose(mine["value"], [value for _, value in top], rtol=1e-4, atol=1e-5)
        # positions agree except where two documents' strengths tie to float precision
        strengths = dict(top)
        for position, value in zip(mine["position"], mine["value"], strict=True):
            assert strengths.get(int(position), -1) == pytest.approx(value, rel=1e-4, abs=1e-5)


def test_a_passage_is_a_slice_of_its_document_where_the_feature_fires(workspace, run):
    stored = workspace.evidence.of(run.record.run_id)
    texts = workspace.documents(run.record.dataset_id, ["position", "text"]).set_index("position")["text"]
    lengths = texts.str.len().reindex(stored["position"]).to_numpy()
    assert ((stored["start"] >= 0) & (stored["start"] < stored["end"]) & (stored["end"] <= lengths)).all()
    feature = int(stored.loc[stored["value"].idxmax(), "feature_id"])
    top = stored[stored["feature_id"] == feature].iloc[0].to_dict()
    top = {key: value if key == "value" else int(value) for key, value in top.items()}
    inside = pipeline.document_passage_features(workspace, run, int(top["position"]))
    carrying = inside[inside["feature_id"] == feature]
    strongest = carrying.loc[carrying["value"].idxmax()]
    assert (strongest["number"], strongest["start"], strongest["end"]) == (top["number"], top["start"], top["end"])
    assert strongest["value"] == pytest.approx(top["value"], rel=1e-5)
    quotes = pipeline.feature_quotes(workspace, run, [feature])
    text = texts[int(top["position"])]
    assert quotes["quote"].iloc[0] == snippet(text[top["start"] : top["end"]], QUOTE_CHARS)
    assert quotes["title"].iloc[0] == workspace.documents_at(run.record.dataset_id, [top["position"]])["title"][0]


def test_marked_pieces_put_a_document_back_together_with_its_passages_marked():
    text = "First sentence here. The second one carries it. A third, plain."
    marked = pd.DataFrame({"start": [21], "end": [47]})
    pieces = marked_pieces(text, marked)
    assert "".join(piece for piece, _ in pieces) == text
    assert [piece for piece, carries in pieces if carries] == ["The second one carries it."]


def test_evidence_is_deleted_with_its_run(small_run, tmp_path):
    workspace = small_run.copy(tmp_path / "workspace")
    run_id = small_run.run.run_id
    assert workspace.evidence.of(run_id) is not None
    workspace.delete_run(run_id)
    assert workspace.evidence.of(run_id) is None
    assert workspace.db.open_table("evidence").count_rows(f"run_id = '{run_id}'") == 0


def test_a_run_trained_before_evidence_gets_it_when_asked_and_keeps_it(small_run, tmp_path):
    workspace = small_run.copy(tmp_path / "workspace")
    run_id = small_run.run.run_id
    found_at_training = workspace.evidence.of(run_id)
    workspace.db.open_table("evidence").delete(f"run_id = '{run_id}'")  # as a run from before evidence was kept
    assert workspace.evidence.of(run_id) is None
    run = pipeline.load_run(workspace, run_id)
    pd.testing.assert_frame_equal(pipeline.feature_evidence(workspace, run), found_at_training)
    pd.testing.assert_frame_equal(workspace.evidence.of(run_id), found_at_training)


def test_the_labelling_prompt_opens_with_the_features_top_passages(small_run, tmp_path):
    workspace = small_run.copy(tmp_path / "workspace")
    run = pipeline.load_run(workspace, small_run.run.run_id)
    feature = int(run.features.sort_values("density", ascending=False)["feature_id"].iloc[0])
    quotes = pipeline.feature_quotes(workspace, run, [feature])
    with running_fake_ollama() as fake:
        summary = label_run(
            workspace, run, ollama_labeller(OllamaConfig(host=fake.url, timeout_s=5.0)), feature_ids=[feature]
        )
        prompts = fake.user_prompts()
    assert summary.n_labelled == 1 and len(prompts) == 1
    shown = prompts[0][prompts[0].index("<passages>") : prompts[0].index("</passages>")]
    assert prompts[0].index("</passages>") < prompts[0].index("<evidence>")
    for quote in quotes["quote"]:
        assert neutralise_markup(quote[:60]) in shown


def test_the_report_quotes_the_main_concepts_passages_escaped(small_run, tmp_path):
    workspace = small_run.copy(tmp_path / "workspace")
    run = pipeline.load_run(workspace, small_run.run.run_id)
    feature = evidence_features(run)[0]
    stored = workspace.evidence.of(run.record.run_id)
    top = stored[(stored["feature_id"] == feature) & (stored["rank"] == 0)].iloc[0]
    position, start = int(top["position"]), int(top["start"])
    text = workspace.documents_at(run.record.dataset_id, [position])["text"][0]
    hostile = text[:start] + SCRIPT + text[start + len(SCRIPT) :]  # the passage now opens with markup
    where = f"dataset_id = '{run.record.dataset_id}' AND position = {position}"
    workspace.db.open_table("documents").update(where=where, values={"text": hostile})
    page = report_html(workspace, run, ReportConfig())
    assert SCRIPT not in page
    assert f"“{escape(SCRIPT)}" in page  # the quote, escaped as Jinja escapes it
    quotes = pipeline.feature_quotes(workspace, run, evidence_features(run), EVIDENCE_QUOTES)
    read = Page(page).reads()
    assert "Where the main concepts appear" in read
    for quote in quotes["quote"]:
        assert " ".join(quote.split()) in read


def test_documents_placed_in_a_run_compete_for_its_evidence(small_run, bbc, tmp_path):
    workspace = small_run.copy(tmp_path / "workspace")
    unseen = bbc.groupby("label").nth([PER_CATEGORY, PER_CATEGORY + 1])  # 10 articles the run has not seen
    unseen.to_parquet(tmp_path / "more.parquet")
    pipeline.grow_dataset(workspace, small_run.dataset_id, [tmp_path / "more.parquet"])
    run = pipeline.load_run(workspace, small_run.run.run_id)
    assert run.codes.shape[0] == 70
    stored = workspace.evidence.of(run.record.run_id)
    for feature, top in expected_top(workspace, run).items():
        mine = stored[stored["feature_id"] == feature].sort_values("rank")
        np.testing.assert_allclose(mine["value"], [value for _, value in top], rtol=1e-4, atol=1e-5)
    assert (stored["position"] >= 60).any()  # a new article is among the strongest somewhere
