"""The demo corpus loader: reads the Kaggle MTSamples export or our curated copy, caches downloads, fails helpfully."""

import pandas as pd
import pytest

from prisma_core.errors import IngestError
from prisma_core.ingest import read_sources
from prisma_core.pipeline.demo import DEMO_INGEST, DemoConfig, demo_corpus, demo_source


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
    notes = demo_corpus("unused", DemoConfig("mtsamples", n_documents=100, local_file=str(kaggle_csv)))
    assert list(notes.columns) == ["id", "title", "specialty", "text"]
    assert len(notes) == 100 and notes["text"].is_unique
    assert set(notes["specialty"]) <= set(mtsamples["label"].head(120))
    assert not notes["text"].str.contains(":,").any()
    assert set(notes["text"]) <= set(mtsamples["text"].head(120))
    again = demo_corpus("unused", DemoConfig("mtsamples", n_documents=100, local_file=str(kaggle_csv)))
    pd.testing.assert_frame_equal(notes, again)


def test_demo_source_reads_back_through_ingest(corpora_dir):
    config = DemoConfig("mtsamples", n_documents=50, local_file=str(corpora_dir / "mtsamples.parquet"))
    dataset = read_sources([demo_source("unused", config)], DEMO_INGEST)
    assert dataset.report.n_documents == 50
    assert list(dataset.documents.columns) == ["doc_id", "title", "text", "text_hash", "specialty"]
    assert dataset.documents["doc_id"].str.startswith("mts-").all()


def test_cached_download_is_reused_without_network(kaggle_csv, tmp_path):
    (tmp_path / "mtsamples.csv").write_bytes(kaggle_csv.read_bytes())
    config = DemoConfig("mtsamples", n_documents=60, url="http://127.0.0.1:9/unreachable.csv")
    assert len(demo_corpus(tmp_path, config)) == 60


def test_unreachable_source_says_how_to_work_offline(tmp_path):
    config = DemoConfig("mtsamples", url="http://127.0.0.1:9/unreachable.csv", timeout_s=5)
    with pytest.raises(IngestError, match="Without network, set PRISMA_DEMO_FILE to a local copy"):
        demo_corpus(tmp_path, config)
    assert not list(tmp_path.iterdir())  # no partial download is left to pass for a cached corpus


def test_missing_local_file_and_settings(tmp_path, monkeypatch):
    with pytest.raises(IngestError, match="does not exist"):
        demo_corpus(tmp_path, DemoConfig("mtsamples", local_file=str(tmp_path / "nope.csv")))
    monkeypatch.setenv("PRISMA_DEMO_DOCS", "75")
    monkeypatch.setenv("PRISMA_DEMO_FILE", "/from/env.csv")
    assert DemoConfig.from_settings() == DemoConfig("mtsamples", 75, local_file="/from/env.csv")
    assert DemoConfig.from_settings({"PRISMA_DEMO_FILE": "/from/secrets.csv", "PRISMA_DEMO_DOCS": None}) == DemoConfig(
        "mtsamples", 75, local_file="/from/secrets.csv"
    )


def test_the_default_demo_reads_the_notes_shipped_with_prisma_without_network(tmp_path, monkeypatch):
    for setting in ("PRISMA_DEMO_FILE", "PRISMA_DEMO_DOCS"):  # the app tests' session sets them
        monkeypatch.delenv(setting, raising=False)
    config = DemoConfig(url="http://127.0.0.1:9/unreachable.csv", timeout_s=1)
    assert (config.corpus, config.size, config.dataset_name) == ("sample", 150, "Clinical notes demo")
    notes = demo_corpus(tmp_path, config)
    assert len(notes) == 150 and notes["text"].is_unique and notes["id"].is_unique
    assert notes["specialty"].value_counts().to_dict() == {
        specialty: 25
        for specialty in (
            "Cardiovascular / Pulmonary",
            "Gastroenterology",
            "Neurology",
            "Obstetrics / Gynecology",
            "Orthopedic",
            "Urology",
        )
    }
    assert notes["text"].str.split().str.len().between(100, 250).all()
    assert not list(tmp_path.iterdir())  # nothing downloaded or cached
    assert len(demo_corpus(tmp_path, DemoConfig(n_documents=60))) == 60
    assert DemoConfig(n_documents=400).size == 150  # at most the sample's notes
    larger = DemoConfig(n_documents=80).larger()
    assert (larger.corpus, larger.size, larger.dataset_name) == ("mtsamples", 80, "MTSamples demo")
    assert (DemoConfig().larger().size, DemoConfig.from_settings({}).corpus) == (400, "sample")
    with pytest.raises(ValueError, match="needs corpus='mtsamples'"):
        DemoConfig(local_file="copy.csv")


@pytest.mark.slow
def test_the_default_demo_finds_the_specialties_of_its_notes(tmp_path):
    """The sample demo's themes follow the six specialties a reader would sort the notes by; its run trains on the
    notes' passages and is rated fair or better, with more features than sub-themes."""
    from prisma_core.pipeline.demo import run_demo
    from prisma_core.reading.run_quality import overfitting, quality_words
    from prisma_core.reading.runs import load_run
    from prisma_core.store import Workspace

    workspace = Workspace(tmp_path)
    dataset_id, run_id = run_demo(workspace, DemoConfig())
    run = load_run(workspace, run_id)
    strongest = run.themes.strongest()
    specialty = workspace.metadata(dataset_id)["specialty"].astype(str).to_numpy()
    counts = pd.crosstab(strongest, specialty)
    assert counts.max(axis=1).sum() / len(specialty) >= 0.65  # purity: a theme is mostly one specialty
    assert (counts.idxmax(axis=0).nunique()) >= 5  # and most specialties lead a theme of their own
    # issue 44: the demo an analyst opens is trustworthy: fair or better, and finer features than sub-themes
    metrics, settings = run.record.metrics, run.record.config["sae"]
    assert settings["passages"] and metrics["passages_trained"] > 5 * metrics["n_train"]  # notes of 7 passages or so
    assert quality_words(run.record).startswith(("fair", "good")) and not overfitting(run.record)
    assert metrics["features_kept"] >= 48 > run.subthemes.n_subthemes
