"""Evidence passages in the app, on a copy of the small real run: a feature's card lists where it appears (its
strongest passages, quoted with their documents), and Explore highlights the passages of a document that carry the
concept picked."""

import pandas as pd
import pytest
from app_helpers import new_app, open_page, texts

from prisma_core import pipeline
from prisma_core.concepts.evidence import marked_pieces, passages_carrying
from prisma_core.store import WORKSPACE_ENV
from ui.text import highlighted, md


@pytest.fixture(scope="module")
def app_run(small_run, tmp_path_factory):
    workspace = small_run.copy(tmp_path_factory.mktemp("evidence_app") / "workspace")
    with pytest.MonkeyPatch.context() as environment:
        environment.setenv(WORKSPACE_ENV, str(workspace.path))
        yield workspace, pipeline.load_run(workspace, small_run.run.run_id)


def test_a_feature_card_lists_where_it_appears(app_run):
    workspace, run = app_run
    at = open_page(new_app(run.record.dataset_id, run.record.run_id), "features")
    feature = int(run.features.sort_values("density", ascending=False)["feature_id"].iloc[0])
    at.selectbox(key="feature_pick").select(feature).run()
    assert not at.exception
    shown = texts(at.markdown)
    assert any(text.startswith("**Where it appears**") for text in shown)
    quotes = pipeline.feature_quotes(workspace, run, [feature])
    assert len(quotes) >= 2
    for quote in quotes.itertuples():
        assert f"“{quote.quote}”" in shown
    captions = texts(at.caption)
    assert any(f"document {quotes['doc_id'].iloc[0]} · strength {quotes['value'].iloc[0]:.3f}" in c for c in captions)


def test_explore_highlights_the_passages_that_carry_the_concept_picked(app_run):
    workspace, run = app_run
    evidence = workspace.evidence.of(run.record.run_id)
    top = evidence.loc[evidence["value"].idxmax()]  # a passage that surely carries its feature
    position, feature = int(top["position"]), int(top["feature_id"])
    at = open_page(new_app(run.record.dataset_id, run.record.run_id), "explore")
    at.selectbox(key="refract_doc").select(position).run()
    at.selectbox(key=f"refract_highlight_{position}").select(feature).run()
    assert not at.exception
    text = workspace.documents_at(run.record.dataset_id, [position])["text"][0]
    carrying = passages_carrying(pipeline.document_passage_features(workspace, run, position), feature)
    assert int(top["number"]) in carrying["number"].tolist()
    expected = highlighted(marked_pieces(text, carrying))
    (shown,) = [element.value for element in at.markdown if ":orange-background[" in element.value]
    assert shown.split() == expected.split()  # as written (Streamlit drops the spaces of blank lines)
    first_line = text[int(top["start"]) : int(top["end"])].split("\n")[0]
    assert f":orange-background[{md(first_line)}" in shown
    assert any(caption.startswith("Highlighted: the ") for caption in texts(at.caption))


def test_highlighting_keeps_the_text_and_its_line_breaks_and_escapes_markdown():
    text = "Intro line.\n[link](javascript:x) carries *it*.\nLast."
    marked = highlighted(marked_pieces(text, pd.DataFrame({"start": [12], "end": [46]})))
    assert marked == (
        "Intro line\\.  \n:orange-background[\\[link\\]\\(javascript\\:x\\) carries \\*it\\*\\.]  \nLast\\."
    )
