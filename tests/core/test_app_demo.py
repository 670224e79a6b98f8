"""The demo corpus loader: reads the Kaggle MTSamples export or our curated copy, caches downloads, fails helpfully."""

import pandas as pd
import pytest

from prisma_core.demo import DEMO_INGEST, DemoConfig, demo_corpus, demo_source
from prisma_core.errors import IngestError
from prisma_core.ingest import read_sources


@pytest.fixture(scope="module")
def kaggle_csv(mtsamples, tmp_path_factory):
    """Real notes in the shape of Kaggle's mtsamples.csv: headers glued to commas, padded specialties, an empty row."""
    rows = mtsamples.head(120)
    frame = pd.DataFrame(
        {
            "description": rows["description"],
            "medical_specialty": " " + rows["label"],
            "sample_name": rows["title"] + " ",
            "transcription": rows["text"].str.replace(": ", ":,", n=1, regex=False),
            "keywords": rows["keywords"],
        }
    )
    frame = pd.concat([frame, frame.head(3), frame.head(1).assign(transcription=None)], ignore_index=True)
    path = tmp_path_factory.mktemp("kaggle") / "mtsamples.csv"
    frame.to_csv(path)
    return path


def test_kaggle_export_is_normalised_and_sampled(kaggle_csv, mtsamples):
    notes = demo_corpus("unused", DemoConfig(n_documents=100, local_file=str(kaggle_csv)))
    assert list(notes.columns) == ["id", "title", "specialty", "text"]
    assert len(notes) == 100 and notes["text"].is_unique
    assert set(notes["specialty"]) <= set(mtsamples["label"].head(120))
    assert not notes["text"].str.contains(":,").any()
    assert set(notes["text"]) <= set(mtsamples["text"].head(120))
    again = demo_corpus("unused", DemoConfig(n_documents=100, local_file=str(kaggle_csv)))
    pd.testing.assert_frame_equal(notes, again)


def test_demo_source_reads_back_through_ingest(corpora_dir):
    config = DemoConfig(n_documents=50, local_file=str(corpora_dir / "mtsamples.parquet"))
    dataset = read_sources([demo_source("unused", config)], DEMO_INGEST)
    assert dataset.report.n_documents == 50
    assert list(dataset.documents.columns) == ["doc_id", "title", "text", "text_hash", "specialty"]
    assert dataset.documents["doc_id"].str.startswith("mts-").all()


def test_cached_download_is_reused_without_network(kaggle_csv, tmp_path):
    (tmp_path / "mtsamples.csv").write_bytes(kaggle_csv.read_bytes())
    config = DemoConfig(n_documents=60, url="http://127.0.0.1:9/unreachable.csv")
    assert len(demo_corpus(tmp_path, config)) == 60


def test_unreachable_source_says_how_to_work_offline(tmp_path):
    config = DemoConfig(url="http://127.0.0.1:9/unreachable.csv", timeout_s=5)
    with pytest.raises(IngestError, match="Without network, set PRISMA_DEMO_FILE to a local copy"):
        demo_corpus(tmp_path, config)
    assert not list(tmp_path.iterdir())  # no partial download is left to pass for a cached corpus


def test_missing_local_file_and_settings(tmp_path, monkeypatch):
    with pytest.raises(IngestError, match="does not exist"):
        demo_corpus(tmp_path, DemoConfig(local_file=str(tmp_path / "nope.csv")))
    monkeypatch.setenv("PRISMA_DEMO_DOCS", "75")
    monkeypatch.setenv("PRISMA_DEMO_FILE", "/from/env.csv")
    assert DemoConfig.from_settings() == DemoConfig(n_documents=75, local_file="/from/env.csv")
    assert DemoConfig.from_settings({"PRISMA_DEMO_FILE": "/from/secrets.csv", "PRISMA_DEMO_DOCS": None}) == DemoConfig(
        n_documents=75, local_file="/from/secrets.csv"
    )
