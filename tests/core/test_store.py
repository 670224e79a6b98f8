import json
import os
import re
import shutil
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from bbc_openings import BbcOpenings
from small_run import SMALL_SAE, SmallRun

from prisma_core import pipeline
from prisma_core.cli import main as cli_main
from prisma_core.concepts.families import FamilyConfig
from prisma_core.embed import EmbedConfig, model_key
from prisma_core.errors import DamagedTableError, NotFoundError, StoreError
from prisma_core.ingest import IngestConfig, read_sources
from prisma_core.interpret import keyword_labeller
from prisma_core.interpret.keywords import corpus_terms
from prisma_core.progress import Progress
from prisma_core.store import Workspace
from prisma_core.store import datasets as datasets_module
from prisma_core.store import retry as retry_module
from prisma_core.store import vectors as vectors_module
from prisma_core.store.datasets import text_hash
from prisma_core.store.retry import retry
from prisma_core.store.schemas import SCHEMAS


@pytest.fixture(scope="module")
def small_corpus(small_run: SmallRun):
    """60 whole BBC articles, 12 per category."""
    return small_run.corpus


@pytest.fixture(scope="module")
def trained(tmp_path_factory, small_run: SmallRun):
    """The session's small run (ingested, embedded, trained through the pipeline), copied for this module's changes."""
    workspace = small_run.copy(tmp_path_factory.mktemp("store") / "workspace")
    return workspace, small_run.dataset_id, small_run.embedded, small_run.run


def test_documents_round_trip_with_metadata(trained, bbc):
    workspace, dataset_id, _, _ = trained
    record = workspace.dataset(dataset_id)
    assert record.name == "bbc small" and record.n_documents == 60
    assert record.metadata_columns == ["label"]
    docs = workspace.documents(dataset_id)
    expected = bbc.groupby("label").head(12)
    assert docs["doc_id"].tolist() == expected["id"].tolist()
    assert docs["text"].tolist() == expected["text"].tolist()
    assert docs["title"].tolist() == expected["title"].tolist()
    assert workspace.metadata(dataset_id)["label"].tolist() == expected["label"].tolist()


def test_second_embedding_run_hits_the_cache_for_every_document(trained):
    workspace, dataset_id, first, _ = trained
    assert first.n_computed == 60 and first.n_cached == 0
    again = pipeline.embed_dataset(workspace, dataset_id)
    assert again.n_cached == 60 and again.n_computed == 0


def test_a_new_dataset_reuses_vectors_of_texts_already_seen(trained, small_corpus, tmp_path, bbc):
    workspace, dataset_id, _, _ = trained
    mixed = pd.concat([pd.read_parquet(small_corpus).head(30), bbc[bbc["label"] == "tech"].tail(5)])
    path = tmp_path / "mixed.parquet"
    mixed.to_parquet(path)
    other_id, _ = pipeline.ingest(workspace, [path], "mixed", IngestConfig(id_column="id"))
    summary = pipeline.embed_dataset(workspace, other_id)
    assert (summary.n_cached, summary.n_computed) == (30, 5)
    key = model_key(EmbedConfig())
    np.testing.assert_array_equal(workspace.vectors(other_id, key)[:30], workspace.vectors(dataset_id, key)[:30])
    workspace.delete_dataset(other_id)
    assert [d.dataset_id for d in workspace.datasets()] == [dataset_id]
    assert workspace.vectors(dataset_id, key).shape == (60, 384)


def test_vector_search_finds_the_document_itself(trained):
    workspace, dataset_id, _, _ = trained
    key = model_key(EmbedConfig())
    vectors = workspace.vectors(dataset_id, key)
    hits = workspace.search_documents(dataset_id, key, vectors[17], limit=3)
    assert hits["position"].iloc[0] == 17
    assert hits["distance"].iloc[0] == pytest.approx(0, abs=1e-5)


def test_past_the_index_threshold_vectors_get_a_cosine_index_and_search_still_finds_the_document(
    tmp_path, bbc, monkeypatch
):
    """The IVF-PQ index LanceDB builds past INDEX_MIN_ROWS (a million in use; 300 here), through its current API."""
    monkeypatch.setattr(vectors_module, "INDEX_MIN_ROWS", 300)
    path = tmp_path / "bbc300.parquet"
    bbc.head(300).to_parquet(path)
    workspace = Workspace(tmp_path / "workspace")
    dataset_id, _ = pipeline.ingest(workspace, [path], "bbc 300", IngestConfig(id_column="id"))
    vectors = np.random.default_rng(0).normal(size=(300, 384)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        workspace.save_vectors(dataset_id, "index test", vectors)
    (index,) = workspace.db.open_table(vectors_module.vectors_table_name("index test")).list_indices()
    assert index.index_type == "IvfPq" and index.columns == ["vector"]
    assert index.index_details["metric_type"] == "COSINE"
    hits = workspace.search_documents(dataset_id, "index test", vectors[17] * 3, limit=3)
    assert hits["position"].iloc[0] == 17 and hits["distance"].iloc[0] == pytest.approx(0, abs=1e-4)


def test_run_record_and_artefacts(trained):
    workspace, dataset_id, _, summary = trained
    record = workspace.run(summary.run_id)
    assert record.dataset_id == dataset_id
    assert record.config["sae"]["seed"] == 0 and record.config["sae"]["k"] == SMALL_SAE.k
    assert record.config["sae"]["n_trainings"] == record.metrics["n_trainings"] == SMALL_SAE.n_trainings
    assert record.config["embed"]["model"] == "all-MiniLM-L6-v2"
    assert {"torch", "lancedb", "prisma"} <= set(record.versions)
    features = workspace.feature_stats.of(summary.run_id)
    assert workspace.activations.batches(summary.run_id)[0] == features["density"].sum() <= 60 * SMALL_SAE.k
    kept = record.metrics["features_kept"]
    assert len(features) == kept <= record.config["sae"]["n_features"]
    compared = SMALL_SAE.n_trainings
    assert set(features["found_in"]) <= set(range(SMALL_SAE.kept_at_least(), compared + 1))
    assert (features["found_in"] == compared).sum() == record.metrics["found_in_all"]
    interpretations = workspace.labels.of(summary.run_id)
    assert len(interpretations) == kept and set(interpretations["source"]) == {"keywords"}
    assert workspace.run_or_latest(summary.run_id) == record
    assert workspace.run_or_latest(None, dataset_id) == record == workspace.run_or_latest()  # the only run so far


def test_preferred_interpretation_wins(trained):
    workspace, _, _, summary = trained
    workspace.labels.add(
        summary.run_id,
        [{"feature_id": 3, "label": "model name", "description": "an LLM's label", "source": "llama3"}],
    )
    run = pipeline.load_run(workspace, summary.run_id)
    assert run.features.loc[run.features["feature_id"] == 3, "label"].item() == "model name"  # newest, not keywords
    keyword_id = (
        workspace.labels.of(summary.run_id).query("feature_id == 3 and source == 'keywords'")["interpretation_id"]
    ).item()
    workspace.labels.prefer(summary.run_id, 3, keyword_id)
    run = pipeline.load_run(workspace, summary.run_id)
    assert run.features.loc[run.features["feature_id"] == 3, "label_source"].item() == "keywords"


def test_rebuilding_families_replaces_the_previous_set(trained):
    workspace, _, _, summary = trained
    loose = pipeline.rebuild_families(workspace, summary.run_id, FamilyConfig(tau=0.05, iterations=1))
    assert workspace.groups.families(summary.run_id) == loose  # typed, as rebuilt
    strict = pipeline.rebuild_families(workspace, summary.run_id, FamilyConfig(tau=0.9, iterations=1))
    assert len(workspace.groups.families(summary.run_id)) == len(strict) <= len(loose)


def test_failed_training_leaves_earlier_runs_intact(trained):
    workspace, dataset_id, _, summary = trained
    activations = workspace.activations.batches(summary.run_id)[0]

    def crash(event: Progress) -> None:
        if event.stage == "train_sae" and event.done > 1:
            raise KeyboardInterrupt  # the process being stopped half-way

    with pytest.raises(KeyboardInterrupt):
        pipeline.train_run(workspace, dataset_id, SMALL_SAE, progress=crash)
    assert [run.run_id for run in workspace.runs(dataset_id)] == [summary.run_id]
    assert sorted(p.name for p in (workspace.path / "runs").iterdir()) == [summary.run_id]
    assert workspace.activations.batches(summary.run_id)[0] == activations


def test_unknown_ids_raise_not_found(trained):
    workspace, _, _, _ = trained
    with pytest.raises(NotFoundError):
        workspace.dataset("ds-missing")
    with pytest.raises(NotFoundError):
        workspace.run("run-missing")
    with pytest.raises(NotFoundError):
        workspace.documents("x' OR '1'='1")


def test_training_before_embedding_says_what_to_do(tmp_path, small_corpus):
    workspace = Workspace(tmp_path)
    dataset_id, _ = pipeline.ingest(workspace, [small_corpus], "fresh")
    with pytest.raises(NotFoundError, match="run the embedding step"):
        pipeline.train_run(workspace, dataset_id, SMALL_SAE)
    assert workspace.runs() == []
    with pytest.raises(NotFoundError, match="train one first"):
        workspace.run_or_latest(None, dataset_id)


def test_storing_a_dataset_loads_no_embedding_model_code(tmp_path):
    """Ingesting (and `prisma list`) should not pay for torch: hashing a text for the cache needs only hashlib."""
    code = (
        "import sys, pandas as pd\n"
        "from prisma_core.store import Workspace\n"
        "workspace = Workspace(sys.argv[1])\n"
        "workspace.add_dataset('notes', pd.DataFrame({'doc_id': ['a'], 'text': ['a note']}), ['notes.csv'], {})\n"
        "print(len(workspace.documents(workspace.datasets()[0].dataset_id)['text_hash'][0]))\n"
        "print(sorted({'torch', 'prisma_core.embed'} & set(sys.modules)))"
    )
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert result.stdout.split() == ["64", "[]"], result.stderr


def test_listing_leaves_an_abandoned_run_folder_alone_and_the_next_run_removes_it(tmp_path, capsys):
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    abandoned = tmp_path / "runs" / "run-20000101-000000-abcdef"
    abandoned.mkdir(parents=True)
    (abandoned / "owner.json").write_text(json.dumps({"host": socket.gethostname(), "pid": int(ended.stdout)}))
    assert cli_main(["list", "--workspace", str(tmp_path)]) == 0
    assert abandoned.is_dir()  # a read never deletes
    run_id, folder = Workspace(tmp_path).new_run_dir()
    assert not abandoned.exists() and sorted((tmp_path / "runs").iterdir()) == [Path(folder)]
    assert folder.name == run_id


def test_a_run_counts_its_corpus_terms_once_for_features_themes_and_families(trained, monkeypatch):
    workspace, dataset_id, _, _ = trained
    counted: list[int] = []

    def counting(texts, config):
        counted.append(len(texts))
        return corpus_terms(texts, config)

    monkeypatch.setattr(keyword_labeller, "corpus_terms", counting)
    summary = pipeline.train_run(workspace, dataset_id, SMALL_SAE)
    assert counted == [60]
    assert (
        workspace.groups.families(summary.run_id) and len(workspace.groups.themes(summary.run_id)) == summary.n_themes
    )


def openings_of_sixty(bbc_openings: BbcOpenings, folder: Path) -> tuple[Path, np.ndarray]:
    """A parquet file of the openings of 60 BBC articles (12 per desk; one model window each, all an embedding test
    of slices, windows and the cache needs), and their vectors embedded in one go (the session's bbc_openings)."""
    articles = bbc_openings.corpus.groupby("label").head(12)
    articles.to_parquet(folder / "openings60.parquet", index=False)
    return folder / "openings60.parquet", bbc_openings.vectors()[articles.index]


def test_an_interrupted_embedding_resumes_from_the_slices_already_stored(tmp_path, bbc_openings):
    corpus, whole = openings_of_sixty(bbc_openings, tmp_path)
    workspace = Workspace(tmp_path / "ws")
    dataset_id, _ = pipeline.ingest(workspace, [corpus], "resumed", IngestConfig(id_column="id"))
    reports: list[Progress] = []

    def interrupt_in_second_slice(event: Progress) -> None:
        reports.append(event)
        if event.done > 25:
            raise KeyboardInterrupt  # the process stopped half-way through the second slice

    with pytest.raises(KeyboardInterrupt):
        pipeline.embed_dataset(workspace, dataset_id, progress=interrupt_in_second_slice, slice_documents=25)
    key = model_key(EmbedConfig())
    assert workspace.stored_positions(dataset_id, key) == set(range(25))
    assert not workspace.has_vectors(dataset_id, key)
    with pytest.raises(NotFoundError, match="not been embedded"):
        workspace.vectors(dataset_id, key)
    assert all(event.total == 60 and event.stage == "embed" for event in reports)

    resumed = pipeline.embed_dataset(workspace, dataset_id, slice_documents=25)
    assert (resumed.n_computed, resumed.n_cached) == (35, 25)
    resumed_vectors = workspace.vectors(dataset_id, key)
    cosine = np.einsum("ij,ij->i", resumed_vectors, whole) / np.linalg.norm(resumed_vectors, axis=1)
    assert (cosine / np.linalg.norm(whole, axis=1)).min() > 0.999


def test_ingest_hashes_each_text_once_and_stores_that_hash(tmp_path, small_corpus, monkeypatch):
    """Each stored document's text is hashed once (finding repeated texts and the embedding cache's key share it),
    through batches of 16 rows, with repeated and blank texts among them."""
    articles = pd.read_parquet(small_corpus)
    again = articles.head(3).assign(id=lambda frame: frame["id"] + "-again")
    blank = pd.DataFrame({"id": ["blank"], "title": ["Blank"], "text": ["   "]})
    path = tmp_path / "repeated.parquet"
    pd.concat([articles, again, blank]).to_parquet(path)
    hashed: list[str] = []

    def counted(text: str) -> str:
        hashed.append(text)
        return text_hash(text)

    monkeypatch.setattr(datasets_module, "text_hash", counted)
    workspace = Workspace(tmp_path / "ws")
    dataset_id, report = pipeline.ingest(workspace, [path], "hashed", IngestConfig(id_column="id", batch_rows=16))

    stored = workspace.documents(dataset_id, ["doc_id", "text", "text_hash"])
    assert len(stored) == len(articles) + 3
    assert stored["text_hash"].tolist() == [text_hash(text) for text in stored["text"]]
    assert sorted(hashed) == sorted(stored["text"])  # once per stored document, never for the blank one
    assert report.duplicate_text_ids == again["id"].tolist()


def test_documents_read_whole_are_stored_with_the_hash_of_their_own_text(tmp_path):
    """What read_sources gives (text_hash included) stores as it is; a text_hash that does not match its text is
    hashed anew, since the embedding cache finds vectors by it."""
    source = b"id,text\n1,Markets fell on Monday.\n2,The striker scored twice.\n"
    documents = read_sources([("news.csv", source)], IngestConfig(text_column="text", id_column="id")).documents
    wrong = documents.assign(text_hash=["0" * 64] * len(documents))
    workspace = Workspace(tmp_path / "ws")
    for frame in (documents, wrong):
        stored = workspace.documents(workspace.add_dataset("news", frame, ["news.csv"], {}), ["text", "text_hash"])
        assert stored["text_hash"].tolist() == [text_hash(text) for text in stored["text"]]


def test_embedding_reads_a_window_of_texts_at_a_time_and_computes_a_repeated_text_once(
    tmp_path, bbc_openings, monkeypatch
):
    corpus, whole = openings_of_sixty(bbc_openings, tmp_path)
    articles = pd.read_parquet(corpus)
    again = articles.head(5).assign(id=lambda frame: frame["id"] + "-again")  # positions 60-64 repeat 0-4
    path = tmp_path / "repeated.parquet"
    pd.concat([articles, again]).to_parquet(path)
    workspace = Workspace(tmp_path / "ws")
    dataset_id, _ = pipeline.ingest(workspace, [path], "repeated", IngestConfig(id_column="id"))
    computed: list[int] = []

    def counting_slices(config, missing, progress, slice_documents):
        computed.append(len(missing))
        yield from local_slices(config, missing, progress, slice_documents)

    local_slices = pipeline.dataset._local_slices
    monkeypatch.setattr(pipeline.dataset, "_local_slices", counting_slices)
    monkeypatch.setattr(pipeline.dataset, "WINDOW_DOCUMENTS", 20)
    events: list[Progress] = []
    summary = pipeline.embed_dataset(workspace, dataset_id, progress=events.append)

    assert computed == [20, 20, 20]  # the last window's five texts were found in the cache
    assert (summary.n_computed, summary.n_cached) == (60, 5)
    key = model_key(EmbedConfig())
    vectors = workspace.vectors(dataset_id, key)
    np.testing.assert_array_equal(vectors[60:], vectors[:5])
    cosine = np.einsum("ij,ij->i", vectors[:60], whole) / np.linalg.norm(vectors[:60], axis=1)
    assert (cosine / np.linalg.norm(whole, axis=1)).min() > 0.999
    assert [event.done for event in events] == sorted(event.done for event in events)
    assert events[-1] == Progress("embed", 65, 65, "65 of 65 documents")


def test_the_cache_answers_only_the_text_hashes_asked_for(trained):
    workspace, dataset_id, _, _ = trained
    key = model_key(EmbedConfig())
    first = workspace.documents(dataset_id, ["position", "text_hash"]).iloc[0]
    found = workspace.cached_vectors(key, [first["text_hash"], "0" * 64, "x' OR '1'='1"])
    assert list(found) == [first["text_hash"]]
    np.testing.assert_array_equal(found[first["text_hash"]], workspace.vectors(dataset_id, key)[0])


def conflicting_write(conflicts: int):
    """A write that loses `conflicts` commit races (LanceDB's own message) and then commits."""
    calls = []

    def write() -> str:
        calls.append(1)
        if len(calls) <= conflicts:
            raise RuntimeError("lance error: Retryable commit conflict for version 7: This Append transaction ...")
        return "committed"

    return write, calls


class InstantClock:
    """Stands in for the retry module's `time`: a sleep moves the clock on at once and is recorded."""

    def __init__(self) -> None:
        self.now, self.waits = 0.0, []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


def test_a_write_keeps_retrying_past_many_conflicts_within_its_patience(monkeypatch):
    clock = InstantClock()
    monkeypatch.setattr(retry_module, "time", clock)
    write, calls = conflicting_write(conflicts=12)  # more than the old fixed 8 attempts allowed
    assert retry(write, "/data/prisma", patience_s=60) == "committed"
    assert len(calls) == 13 and len(clock.waits) == 12 and clock.now < 60
    for attempt, wait in enumerate(clock.waits):  # doubling from FIRST_WAIT_S up to LONGEST_WAIT_S, times 0.5 to 1.5
        planned = min(retry_module.LONGEST_WAIT_S, retry_module.FIRST_WAIT_S * 2**attempt)
        assert 0.5 * planned <= wait <= 1.5 * planned


def test_a_write_that_never_wins_says_the_workspace_is_busy_once_its_patience_runs_out():
    write, calls = conflicting_write(conflicts=10**6)
    with pytest.raises(StoreError, match="workspace is busy"):
        retry(write, "/data/prisma", patience_s=1.0)
    assert 3 <= len(calls) < 20


@pytest.mark.parametrize(
    ("where", "failure", "check", "not_for_this_storage"),
    [
        ("/data/prisma", "No space left on device (os error 28)", "free some disk space", "bucket"),
        (
            "s3://team-bucket/prisma",
            "Generic S3 error: QuotaExceeded",
            "check the connection to the storage service, that your access keys may write to the bucket and that "
            "the bucket is not over its quota",
            "disk",
        ),
    ],
    ids=["local-folder", "object-store"],
)
def test_a_failure_that_is_not_a_conflict_is_not_retried_and_says_what_to_check_on_that_storage(
    where: str, failure: str, check: str, not_for_this_storage: str
) -> None:
    calls = []

    def failing_write() -> None:
        calls.append(1)
        raise OSError(failure)

    with pytest.raises(StoreError) as failed:
        retry(failing_write, where)
    message = str(failed.value)
    assert message.startswith(f"Could not write to the workspace: {failure}. What was stored before is unchanged;")
    assert check in message and not_for_this_storage not in message.replace(failure, "")
    assert len(calls) == 1


@pytest.mark.parametrize(("set_before", "expected"), [(None, "error"), ("warn", "warn")])
def test_lancedbs_own_warnings_stay_out_of_prismas_output_unless_asked_for(tmp_path, set_before, expected):
    environment = {k: v for k, v in os.environ.items() if k != "LANCEDB_LOG"}
    environment |= {"LANCEDB_LOG": set_before} if set_before else {}
    script = (
        f"import os; from prisma_core.store import Workspace; Workspace({str(tmp_path)!r}); "
        "print(os.environ['LANCEDB_LOG'])"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environment, check=True)
    assert done.stdout.strip() == expected


def test_tables_made_before_a_column_existed_gain_it_empty_and_keep_their_rows(tmp_path):
    """A workspace from an earlier Prisma: its features table has no found_in, its themes no probabilities. Reading
    shows them empty; the next write adds the column, and the old rows keep their values."""
    workspace = Workspace(tmp_path / "ws")
    old, new = "run-20260101-000000-aaaaaa", "run-20260102-000000-bbbbbb"
    stats = {"feature_id": [0, 1], "density": [3, 1], "density_fraction": [0.3, 0.1]}
    stats |= {"mean_activation": [0.5, 0.2], "max_activation": [0.9, 0.2]}
    old_features = pa.table({"run_id": [old, old], **stats}, schema=_without(SCHEMAS["features"], "found_in"))
    workspace.db.create_table("features", data=old_features)
    theme = {"run_id": old, "generation": 0, "theme_id": 0, "label": "t", "description": "", "label_source": "keywords"}
    theme |= {"n_documents": 2, "features": "[0, 1]", "evidence": [0.5, 0.1]}
    old_themes = pa.Table.from_pylist([theme], _without(SCHEMAS["themes"], "probabilities"))
    workspace.db.create_table("themes", data=old_themes)

    assert workspace.feature_stats.of(old)["found_in"].isna().all()
    assert workspace.groups.themes(old)[0]["probabilities"] is None
    workspace.feature_stats.save(new, pd.DataFrame(stats).assign(found_in=[3, 2]))

    assert "found_in" in workspace.db.open_table("features").schema.names
    assert workspace.feature_stats.of(new)["found_in"].tolist() == [3, 2]
    assert workspace.feature_stats.of(old)["found_in"].isna().all()
    assert workspace.feature_stats.of(old)["density"].tolist() == [3, 1]


def _without(schema: pa.Schema, column: str) -> pa.Schema:
    return pa.schema([field for field in schema if field.name != column])


def test_a_table_whose_files_were_removed_is_named_with_lancedbs_reason_in_plain_words(trained, tmp_path):
    workspace, _, _, run = trained
    copy = shutil.copytree(workspace.path, tmp_path / "copy")
    for data_file in (copy / "lancedb" / "features.lance" / "data").iterdir():
        data_file.unlink()
    with pytest.raises(DamagedTableError) as raised:
        Workspace(copy).feature_stats.of(run.run_id)
    message = str(raised.value)
    assert raised.value.table == "features"
    assert re.match(r"The workspace's features table cannot be read \(Not found: /\S+\.lance\): ", message), message
    assert "Wrapped error" not in message and "lance error" not in message and ".rs:" not in message
