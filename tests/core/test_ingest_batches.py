"""Parquet, CSV and JSON lines files on disk are read and stored a batch at a time (issue 14): the same documents as
the file read whole, nothing stored after an error in a late batch, progress up to the total."""

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from prisma_core import pipeline
from prisma_core.errors import IngestError
from prisma_core.ingest import IngestConfig, read_paths, read_sources
from prisma_core.progress import Progress
from prisma_core.store import Workspace

TINY_BATCHES = IngestConfig(id_column="id", batch_rows=7)
FORMATS = ["news.parquet", "news.csv", "news.jsonl"]


@pytest.fixture(scope="module")
def news(bbc: pd.DataFrame) -> pd.DataFrame:
    """60 BBC articles (9 batches of 7) with what only the whole file decides: an id repeated across batches (and
    the id its copy would take, further on), an empty text in a late batch, a repeated text, a date column, an
    integer column with one missing value in a late batch, a column named like a reserved one."""
    frame = bbc.iloc[::37].head(60).reset_index(drop=True)
    frame.loc[30, "id"] = frame.loc[2, "id"]
    frame.loc[50, "id"] = f"{frame.loc[2, 'id']}#2"
    frame.loc[40, "text"] = "   "
    frame.loc[45, "text"] = frame.loc[10, "text"]
    frame["published"] = [f"2024-{1 + row % 12:02d}-{1 + row % 28:02d}" for row in range(len(frame))]
    frame["words"] = pd.array([len(text.split()) for text in frame["text"]], dtype="Int64")
    frame.loc[55, "words"] = pd.NA
    frame["source_file"] = "bbc"
    return frame


def write(frame: pd.DataFrame, path: Path) -> Path:
    match path.suffix:
        case ".parquet":
            frame.to_parquet(path)
        case ".csv":
            frame.to_csv(path, index=False)
        case ".jsonl":
            frame.to_json(path, orient="records", lines=True)
    return path


@pytest.mark.parametrize("name", FORMATS)
def test_tiny_batches_give_the_documents_of_the_whole_file(tmp_path: Path, news: pd.DataFrame, name: str) -> None:
    path = write(news, tmp_path / name)
    batched = read_paths([path], TINY_BATCHES)
    whole = read_sources([(name, path.read_bytes())], TINY_BATCHES)
    pd.testing.assert_frame_equal(batched.documents, whole.documents)
    assert batched.report == whole.report
    first = news.loc[2, "id"]
    assert batched.report.renamed_ids == {f"{first}#3": first}  # "#2" is taken by a later row of another batch
    assert batched.report.empty_ids == [news.loc[40, "id"]]
    assert batched.report.duplicate_text_ids == [news.loc[45, "id"]]
    assert batched.documents["doc_id"].is_unique and len(batched.documents) == len(news) - 1
    assert batched.documents["published"].dtype.kind == "M"
    nullable = name.endswith(".parquet")  # Parquet keeps pandas' nullable integers; CSV and JSON give floats
    assert batched.documents["words"].dtype.kind == ("i" if nullable else "f")  # the batches without a gap too
    assert "source_file_original" in batched.documents.columns
    assert f"{name}: column 'source_file' kept as 'source_file_original'" in batched.report.warnings


@pytest.mark.parametrize("name", FORMATS)
def test_stored_in_batches_as_stored_whole(tmp_path: Path, news: pd.DataFrame, name: str) -> None:
    path = write(news, tmp_path / name)
    workspace = Workspace(tmp_path / "workspace")
    batched_id, batched_report = pipeline.ingest(workspace, [path], "batched", TINY_BATCHES)
    whole_id, whole_report = pipeline.ingest(workspace, [(name, path.read_bytes())], "whole", TINY_BATCHES)
    assert batched_report == whole_report
    columns = ["position", "doc_id", "title", "text", "text_hash", "metadata"]
    batched, whole = workspace.documents(batched_id, columns), workspace.documents(whole_id, columns)
    pd.testing.assert_frame_equal(batched, whole)
    assert batched["position"].tolist() == list(range(len(news) - 1))
    assert json.loads(batched["metadata"].iloc[-1])["words"] == float(news["words"].iloc[-1])
    assert workspace.dataset(batched_id).metadata_columns == workspace.dataset(whole_id).metadata_columns
    assert workspace.dataset(batched_id).report == workspace.dataset(whole_id).report


def test_several_files_in_batches_as_read_whole(tmp_path: Path, news: pd.DataFrame) -> None:
    """Ids are made unique over all files, and a column one file lacks is missing (integers become floats)."""
    paths = [
        write(news.head(25), tmp_path / "a.parquet"),
        write(news.iloc[20:].drop(columns="words"), tmp_path / "b.csv"),
    ]
    batched = read_paths(paths, TINY_BATCHES)
    whole = read_sources([(path.name, path.read_bytes()) for path in paths], TINY_BATCHES)
    pd.testing.assert_frame_equal(batched.documents, whole.documents)
    assert batched.report == whole.report
    assert len(batched.report.renamed_ids) == 6  # rows 20 to 24 are in both files, row 30 repeats row 2's id
    assert batched.documents["source_file"].tolist()[:1] + batched.documents["source_file"].tolist()[-1:] == [
        "a.parquet",
        "b.csv",
    ]


@pytest.mark.parametrize("name", FORMATS)
def test_an_error_in_a_late_batch_stores_nothing(tmp_path: Path, news: pd.DataFrame, name: str) -> None:
    """The first batches are stored before the too-long document of the 8th is met: they are deleted again."""
    frame = news.copy()
    frame.loc[52, "text"] = "word " * 20_000
    path = write(frame, tmp_path / name)
    workspace = Workspace(tmp_path / "workspace")
    events: list[Progress] = []
    config = IngestConfig(id_column="id", batch_rows=7, max_document_chars=50_000)
    with pytest.raises(IngestError, match=re.escape(f"{name}: document '{frame.loc[52, 'id']}' has 100,000")):
        pipeline.ingest(workspace, [path], "late error", config, events.append)
    assert max(event.done for event in events if event.stage == "ingest") == 49  # 7 batches were stored
    assert workspace.datasets() == []
    assert workspace.db.open_table("documents").count_rows() == 0


def test_a_bad_line_late_in_a_file_stores_nothing(tmp_path: Path, news: pd.DataFrame) -> None:
    path = write(news, tmp_path / "news.jsonl")
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines[:57], '{"id": "broken", "text": ', *lines[57:]]) + "\n")
    workspace = Workspace(tmp_path / "workspace")
    with pytest.raises(IngestError, match=re.escape("news.jsonl: line 58 is not valid JSON")):
        pipeline.ingest(workspace, [path], "bad line", TINY_BATCHES)
    assert workspace.datasets() == []


def test_progress_increases_to_the_total(tmp_path: Path, news: pd.DataFrame) -> None:
    path = write(news, tmp_path / "news.parquet")
    events: list[Progress] = []
    _, report = pipeline.ingest(Workspace(tmp_path / "ws"), [path], "progress", TINY_BATCHES, events.append)
    for stage, total in (("check", path.stat().st_size), ("ingest", len(news))):
        done = [event.done for event in events if event.stage == stage]
        assert done == sorted(done) and len(done) >= 9
        assert done[-1] == total and {event.total for event in events if event.stage == stage} == {total}
    assert report.n_documents == len(news) - 1


def test_files_on_disk_are_not_refused_for_size_but_keep_the_row_limit(tmp_path: Path, news: pd.DataFrame) -> None:
    path = write(news, tmp_path / "news.csv")
    small = IngestConfig(id_column="id", batch_rows=7, max_file_bytes=10_000, max_total_bytes=10_000)
    assert len(read_paths([path], small).documents) == len(news) - 1
    with pytest.raises(IngestError, match="more than the 10,000-byte limit per file"):
        read_sources([(path.name, path.read_bytes())], small)
    with pytest.raises(IngestError, match=re.escape("news.csv: has more than 30 rows, the limit per table")):
        read_paths([path], IngestConfig(id_column="id", batch_rows=7, max_rows=30))
