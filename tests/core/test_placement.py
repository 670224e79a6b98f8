"""Documents added to a dataset (pipeline.add_documents) and placed in its runs without retraining
(pipeline/placement.py), on a copy of the small real run: 60 BBC articles, 12 per category."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from small_run import PER_CATEGORY, SmallRun

from prisma_core import pipeline
from prisma_core.cli import main
from prisma_core.errors import IngestError, RunBehindError, StoreError
from prisma_core.pipeline import AddedDocuments, EmbedSummary, Placement, placement
from prisma_core.pipeline.report.writer import write_report
from prisma_core.reading.explore import saved_document_map
from prisma_core.reading.run_quality import placements
from prisma_core.reading.runs import LoadedRun, document_themes, load_run
from prisma_core.store import Workspace
from prisma_core.store.datasets import _document_rows, with_text_hashes
from prisma_core.store.groups import Groups

N_NEW_PER_CATEGORY = 3


def _more_bbc(bbc: pd.DataFrame, folder: Path, repeated: int = 2) -> tuple[Path, pd.DataFrame]:
    """A file of articles the small run has not seen (3 per category), plus `repeated` of the articles it holds."""
    unseen = bbc.groupby("label").nth(list(range(PER_CATEGORY, PER_CATEGORY + N_NEW_PER_CATEGORY)))
    held = bbc.groupby("label").head(PER_CATEGORY).head(repeated)
    frame = pd.concat([unseen, held])
    path = folder / "more.parquet"
    frame.to_parquet(path)
    return path, frame


@dataclass(frozen=True)
class Grown:
    workspace: Workspace
    before: LoadedRun  # the run before the articles were added
    added: AddedDocuments
    behind: RunBehindError  # what opening the run said between adding and placing
    embedded: EmbedSummary
    placed: Placement
    frame: pd.DataFrame  # the file added
    maps: tuple[int, int]  # points on the saved map of the documents before and after the addition


@pytest.fixture(scope="module")
def grown(small_run: SmallRun, bbc: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> Grown:
    """A copy of the small run, read before and after 15 unseen articles were added and placed."""
    folder = tmp_path_factory.mktemp("grown")
    workspace = small_run.copy(folder / "ws")
    before = load_run(workspace)
    key = before.record.embedding_key
    drawn = len(saved_document_map(workspace, small_run.dataset_id, key))
    path, frame = _more_bbc(bbc, folder)
    added = pipeline.add_documents(workspace, small_run.dataset_id, [path])
    maps = (drawn, len(workspace.saved_document_map(small_run.dataset_id, key)))
    with pytest.raises(RunBehindError) as behind:
        load_run(workspace)
    embedded = pipeline.embed_dataset(workspace, small_run.dataset_id)
    (placed,) = pipeline.place_in_runs(workspace, small_run.dataset_id)
    return Grown(workspace, before, added, behind.value, embedded, placed, frame, maps)


def test_added_documents_follow_the_dataset_s_and_repeated_texts_are_skipped(grown, small_run: SmallRun):
    workspace, added, frame = grown.workspace, grown.added, grown.frame
    n_new = 5 * N_NEW_PER_CATEGORY
    assert added.n_added == n_new and added.n_documents == 60 + n_new
    assert added.already_there == frame["id"].tail(2).tolist()  # their texts are in the dataset: skipped
    docs = workspace.documents(small_run.dataset_id, ["position", "doc_id", "text"])
    assert docs["position"].tolist() == list(range(60 + n_new))
    assert docs["doc_id"].tail(n_new).tolist() == frame["id"].head(n_new).tolist()  # read with the dataset's id column
    assert docs["text"].tail(n_new).tolist() == frame["text"].head(n_new).tolist()
    assert workspace.dataset(small_run.dataset_id).sources[-1] == "more.parquet"
    assert grown.embedded.n_computed == n_new and grown.embedded.n_cached == 60  # only the new texts were embedded


def test_a_run_is_not_shown_until_the_new_documents_are_placed_in_it(grown):
    assert (grown.behind.n_covered, grown.behind.n_documents) == (60, 75)
    assert "the 15 added since are not placed in it yet" in str(grown.behind)


def test_placed_documents_get_codes_themes_and_sub_themes_and_the_old_ones_keep_theirs(grown, bbc: pd.DataFrame):
    workspace, before, placed = grown.workspace, grown.before, grown.placed
    after = load_run(workspace, before.record.run_id)
    assert after.codes.shape == (75, before.codes.shape[1])
    assert (after.codes[:60] != before.codes).nnz == 0  # nothing the run knew changes
    np.testing.assert_array_equal(after.themes.probabilities[:60], before.themes.probabilities)
    np.testing.assert_array_equal(after.subthemes.assignment[:60], before.subthemes.assignment)
    np.testing.assert_array_equal(after.themes.evidence, before.themes.evidence)
    assert (np.diff(after.codes[60:].indptr) > 0).all()  # every new document has active features
    themes = document_themes(after)
    new = themes.iloc[60:]
    assert (new["theme_id"] >= 0).all()
    inside = after.subthemes.theme[new["subtheme_id"].to_numpy()] == new["theme_id"].to_numpy()
    assert inside.all()  # every new document's sub-theme lies inside its theme
    assert after.theme_info["n_documents"].sum() >= 75
    density = np.bincount(after.codes.indices, minlength=after.codes.shape[1])
    features = after.features.set_index("feature_id").sort_index()
    np.testing.assert_array_equal(features["density"].to_numpy(), density)  # counted over every document
    np.testing.assert_allclose(features["density_fraction"].to_numpy(), density / 75)
    # a new article goes to the theme that holds most of the run's articles of its category
    categories = workspace.documents(before.record.dataset_id, ["doc_id"])["doc_id"].map(
        dict(zip(bbc["id"], bbc["label"], strict=True))
    )
    majority = pd.crosstab(themes["theme_id"].iloc[:60], categories.iloc[:60]).idxmax(axis=0)
    agree = (new["theme_id"].to_numpy() == majority[categories.iloc[60:]].to_numpy()).mean()
    assert agree >= 0.8, agree
    assert placed.n_before == 60 and placed.n_added == 15
    assert after.record.metrics["n_documents"] == 75


def test_the_map_of_the_documents_is_drawn_again_with_the_new_ones(grown: Grown):
    assert grown.maps == (60, 0)  # the map drawn before is forgotten when documents are added
    record = grown.before.record
    assert saved_document_map(grown.workspace, record.dataset_id, record.embedding_key)["position"].tolist() == list(
        range(75)
    )


def test_the_export_and_the_report_hold_the_placed_documents(grown: Grown, tmp_path):
    run_id = grown.before.record.run_id
    pipeline.export_run(grown.workspace, run_id, tmp_path / "out")
    documents = pd.read_parquet(tmp_path / "out" / "documents.parquet")
    assert len(documents) == 75
    assert documents["doc_id"].tail(15).tolist() == grown.frame["id"].head(15).tolist()
    assert (documents["theme_id"].tail(15) >= 0).all()
    report = write_report(grown.workspace, load_run(grown.workspace, run_id), tmp_path / "report.html")
    assert "<dt>Documents</dt><dd>75</dd>" in report.read_text()


def test_articles_like_the_run_s_need_no_new_training(grown):
    placed = grown.placed
    assert placed.no_fit_added <= placed.no_fit_before + placement.NO_FIT_RISE
    assert placed.detail_added >= placed.detail_before - placement.DETAIL_DROP
    assert placed.reasons == [] and not placed.retrain_advised  # 15 of 75 documents: under a quarter
    assert placed.verdict().startswith("The 15 new documents fit this run as well as the others")


def test_documents_about_other_things_advise_training_again(small_run: SmallRun, mtsamples, tmp_path):
    workspace = small_run.copy(tmp_path / "ws")
    path = tmp_path / "notes.parquet"
    mtsamples.head(30).to_parquet(path)
    added, (placed,) = pipeline.grow_dataset(workspace, small_run.dataset_id, [path])
    assert added.n_added == 30 and placed.n_added == 30
    assert placed.retrain_advised
    assert placed.detail_added < placed.detail_before  # clinical notes: the news features reproduce less of them
    assert placed.no_fit_added > placed.no_fit_before + placement.NO_FIT_RISE
    assert any("of the new documents fit no theme well" in reason for reason in placed.reasons)
    assert any("of the dataset" in reason for reason in placed.reasons)  # 30 of 90 documents
    assert placed.verdict().startswith("Training again would likely change the picture: ")
    assert load_run(workspace).codes.shape[0] == 90


def test_additions_that_together_reach_a_quarter_of_the_dataset_advise_training_again(
    grown: Grown, bbc: pd.DataFrame, tmp_path
):
    workspace = Workspace(shutil.copytree(grown.workspace.path, tmp_path / "ws"))
    more = bbc.groupby("label").nth([20, 21])  # 10 more articles: 25 of 85 documents added since training
    more.to_parquet(tmp_path / "more.parquet")
    _, (placed,) = pipeline.grow_dataset(workspace, grown.before.record.dataset_id, [tmp_path / "more.parquet"])
    assert placed.n_before == 75 and placed.n_added == 10
    assert "the documents added since training are 29% of the dataset" in placed.reasons[0]
    assert [p.n_added for p in placements(workspace, workspace.run(grown.before.record.run_id))] == [15, 10]


def test_a_file_that_cannot_be_read_adds_nothing(small_run: SmallRun, tmp_path):
    workspace = small_run.copy(tmp_path / "ws")
    path = tmp_path / "numbers.csv"
    path.write_text("a,b\n1,2\n3,4\n")
    with pytest.raises(IngestError):
        pipeline.grow_dataset(workspace, small_run.dataset_id, [path])
    assert workspace.dataset(small_run.dataset_id).n_documents == 60
    assert len(workspace.documents(small_run.dataset_id, ["position"])) == 60
    assert load_run(workspace).codes.shape[0] == 60  # the run opens as before


def test_a_placement_stopped_half_way_is_done_again_without_double_codes(
    small_run: SmallRun, bbc: pd.DataFrame, tmp_path, monkeypatch: pytest.MonkeyPatch
):
    workspace = small_run.copy(tmp_path / "ws")
    path, _ = _more_bbc(bbc, tmp_path, repeated=0)
    pipeline.add_documents(workspace, small_run.dataset_id, [path])
    pipeline.embed_dataset(workspace, small_run.dataset_id)

    def killed(*_: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(Groups, "save_themes", killed)  # after the activations and feature counts were written
        with pytest.raises(KeyboardInterrupt):
            pipeline.place_in_runs(workspace, small_run.dataset_id)
    with pytest.raises(RunBehindError):
        load_run(workspace)
    (placed,) = pipeline.place_in_runs(workspace, small_run.dataset_id)
    run = load_run(workspace)
    assert placed.n_added == 15 and run.codes.shape[0] == 75
    n_rows, _ = workspace.activations.batches(run.record.run_id)
    assert n_rows == run.codes.nnz  # the first attempt's activations were removed, not doubled
    assert pipeline.place_in_runs(workspace, small_run.dataset_id)[0].n_added == 0  # nothing left to place


def test_the_command_line_adds_documents_and_says_whether_to_train_again(
    small_run: SmallRun, bbc: pd.DataFrame, tmp_path, capsys
):
    workspace = small_run.copy(tmp_path / "ws")
    path, _ = _more_bbc(bbc, tmp_path)
    code = main(["add", str(path), "--workspace", str(workspace.path), "--dataset", small_run.dataset_id])
    out = capsys.readouterr().out
    assert code == 0
    assert "added 15 documents: the dataset has 75" in out
    assert "2 documents skipped: the dataset holds their text already" in out
    assert f"run {small_run.run.run_id}: The 15 new documents fit this run" in out
    assert main(["place", "--workspace", str(workspace.path)]) == 0
    assert "The run already covers every document of the dataset." in capsys.readouterr().out


def test_documents_are_added_to_a_dataset_by_one_process_at_a_time(small_run: SmallRun, bbc: pd.DataFrame, tmp_path):
    workspace = small_run.copy(tmp_path / "ws")
    path, _ = _more_bbc(bbc, tmp_path, repeated=0)
    held = threading.Event()

    def hold() -> None:  # another session of this (running) process adding documents: a thread of its own
        with Workspace(workspace.path).adding_documents(small_run.dataset_id):
            holding.set()
            held.wait(30)

    holding = threading.Event()
    other_session = threading.Thread(target=hold)
    other_session.start()
    assert holding.wait(30)
    with pytest.raises(StoreError, match="being added to this dataset by another session"):
        pipeline.add_documents(workspace, small_run.dataset_id, [path])
    with pytest.raises(StoreError, match="being added to this dataset by another session"):
        pipeline.place_in_runs(workspace, small_run.dataset_id)
    held.set()
    other_session.join(30)
    assert workspace.dataset(small_run.dataset_id).n_documents == 60
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    killed = json.dumps({"host": socket.gethostname(), "pid": int(ended.stdout)})
    dataset = f"dataset_id = '{small_run.dataset_id}'"
    assert workspace.tables.swap("datasets", dataset, "writer", "", killed)  # an addition killed before it gave it back
    assert pipeline.add_documents(workspace, small_run.dataset_id, [path]).n_added == 15  # its process has ended
    assert workspace.dataset(small_run.dataset_id).writer == ""  # the claim leaves with the addition


def test_rows_a_killed_addition_left_are_not_read_and_are_replaced(small_run: SmallRun, bbc: pd.DataFrame, tmp_path):
    workspace = small_run.copy(tmp_path / "ws")
    dataset_id = small_run.dataset_id
    leftover = with_text_hashes(pd.DataFrame({"doc_id": ["x1", "x2"], "title": [None, None], "text": ["a b c", "d e"]}))
    workspace.tables.add("documents", _document_rows(dataset_id, leftover, 60, []))  # written, the record never updated
    assert len(workspace.documents(dataset_id)) == 60
    assert sum(len(batch) for batch in workspace.document_batches(dataset_id, ["position"])) == 60
    assert len(workspace.metadata(dataset_id)) == 60
    assert workspace.documents_with_ids(dataset_id, ["x1"]).empty
    path, _ = _more_bbc(bbc, tmp_path, repeated=0)
    assert pipeline.add_documents(workspace, dataset_id, [path]).n_added == 15
    docs = workspace.documents(dataset_id, ["position", "doc_id"])
    assert docs["position"].tolist() == list(range(75)) and "x1" not in set(docs["doc_id"])
