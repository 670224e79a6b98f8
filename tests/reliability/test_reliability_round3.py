"""Reliability, round 3 (issue 31): what a probe of 62 cases found broken, each on real parts.

Secrets a server echoes back, settings that destroy data, lists in tables, damaged tables, encodings, unbounded
replies, a labelling race with a families rebuild, and the smaller findings. Each test failed before its fix.
"""

import base64
import dataclasses
import io
import json
import os
import re
import shutil
import time
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from ollama_server import FakeOllama, running_fake_ollama
from reliability_helpers import SMALL_SAE, Running, snapshot

from prisma_core import cli, pipeline
from prisma_core.embed import EmbedConfig, embed_texts
from prisma_core.errors import IngestError, LabellingError, SettingsError, TrainingError
from prisma_core.explore import spreadsheet_csv
from prisma_core.families import FamilyConfig, find_families
from prisma_core.ingest import IngestConfig
from prisma_core.ingest.config import MAX_ROWS
from prisma_core.ingest.readers import SHARED_STRINGS_PER_ROW
from prisma_core.interpret import labelling
from prisma_core.interpret.keywords import UNNAMED_LABEL, keyword_labels
from prisma_core.interpret.labelling.job import LabelConfig
from prisma_core.interpret.manual_labels import save_manual_label
from prisma_core.interpret.ollama_client import MAX_REPLY_BYTES
from prisma_core.interpret.ollama_config import OllamaConfig
from prisma_core.interpret.ollama_labeller import OllamaLabeller
from prisma_core.interpret.prompts import MAX_LABEL_CHARS
from prisma_core.interpret.secrets import redact
from prisma_core.sae.train import DIVERGED, quality_metrics
from prisma_core.store import Workspace

PASSWORD = "s3cret-Passw0rd"
BASIC = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
TOKEN = "tok-9f8e7d6c5b4a"
EVIDENCE = ["Arsenal beat Chelsea at the Emirates.", "Arsenal fans celebrated the cup run.", "Arsenal won again."]


@pytest.fixture
def fake_ollama() -> Iterator[FakeOllama]:
    with running_fake_ollama() as fake:
        yield fake


@pytest.fixture
def workspace(small_run, tmp_path: Path) -> Workspace:
    """A private copy of the session's small run (60 BBC articles, one trained run)."""
    return small_run.copy(tmp_path / "workspace")


def cli_main(*args: str, workspace: Workspace) -> int:
    return cli.main([*args, "--workspace", str(workspace.path)])


def error_lines(stderr: str) -> list[str]:
    return re.findall(r"error: [^\n]*", stderr)


def stored_text(workspace: Workspace) -> str:
    """Every row of every table of the workspace, as text."""
    return "\n".join(workspace.db.open_table(name).to_pandas().to_json() for name in workspace.db.list_tables().tables)


# -- 1. secrets a server echoes back ----------------------------------------------------------------------------


def echo_request_headers(handler: BaseHTTPRequestHandler) -> None:
    """A 500 whose body repeats the request's headers, as some proxies and debug servers do."""
    headers = {name.lower(): value for name, value in handler.headers.items()}
    body = json.dumps({"error": f"upstream failed for {handler.path}; request headers: {json.dumps(headers)}"})
    send(handler, 500, body.encode())


def send(handler: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def test_a_password_echoed_back_in_a_server_error_is_never_printed_stored_or_exported(
    workspace: Workspace, fake_ollama: FakeOllama, tmp_path: Path, capsys
) -> None:
    fake_ollama.raw_chat = echo_request_headers
    host = fake_ollama.url.replace("http://", f"http://alice:{PASSWORD}@")

    assert cli_main("label", "--ollama-host", host, "--max-retries", "0", workspace=workspace) == 2
    printed = capsys.readouterr()
    assert fake_ollama.authorizations[-1] == f"Basic {BASIC}"  # the server did see it, and echoed it
    assert '"authorization": "***"' in printed.out  # the failures are reported, the credential masked
    assert cli_main("export", "--out", str(tmp_path / "export"), workspace=workspace) == 0
    exported = (tmp_path / "export" / "config.json").read_text()
    labelling = [stage for stage in json.loads(exported)["stages"] if stage["stage"] == "labelling"]
    assert labelling and labelling[0]["summary"]["n_failed"] == 3
    for where in (printed.out + printed.err, stored_text(workspace), exported):
        assert PASSWORD not in where and BASIC not in where and BASIC[:8] not in where


def test_a_token_in_the_hosts_query_string_is_refused_before_anything_is_sent_or_stored(
    workspace: Workspace, fake_ollama: FakeOllama, capsys
) -> None:
    before = snapshot(workspace)
    for host in (f"{fake_ollama.url}/?token={TOKEN}", f"{fake_ollama.url}?api_key={TOKEN}#x"):
        assert cli_main("label", "--ollama-host", host, workspace=workspace) == 2
        stderr = capsys.readouterr().err
        (message,) = error_lines(stderr)
        assert "must not hold a query string" in message and TOKEN not in stderr
    assert fake_ollama.authorizations == [] and snapshot(workspace) == before


def test_redaction_covers_echoed_headers_url_queries_and_base64_credentials() -> None:
    config = OllamaConfig(host=f"http://alice:{PASSWORD}@127.0.0.1:9")
    echoed = (
        f'{{"authorization": "Basic {BASIC}", "X-Api-Key": "{TOKEN}"}} at https://h/api?token={TOKEN}&a=1 '
        f"password={PASSWORD} Cookie: session={TOKEN}"
    )
    redacted = config.scrub(echoed)
    assert PASSWORD not in redacted and BASIC not in redacted and TOKEN not in redacted
    assert '"authorization": "***"' in redacted and "https://h/api?***" in redacted
    assert redact("a token limit of 256 and http://host:11434/api/chat") == (
        "a token limit of 256 and http://host:11434/api/chat"
    )  # ordinary words and addresses are left alone


# -- 2. settings that destroy data ------------------------------------------------------------------------------

FLOAT_SETTINGS = [
    ("families", "--tau"),
    ("themes", "--member-share"),
    ("train", "--lr"),
    ("train", "--grad-clip"),
    ("train", "--vectors-memory-mb"),
    ("train", "--aux-alpha"),
    ("label", "--timeout-s"),
    ("label", "--temperature"),
    ("score", "--timeout-s"),
]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_nan_and_infinities_are_refused_for_every_float_setting_before_any_work(
    workspace: Workspace, value: str, capsys
) -> None:
    before = snapshot(workspace)
    families = workspace.families(workspace.run_or_latest().run_id)
    for command, flag in FLOAT_SETTINGS:
        assert cli_main(command, f"{flag}={value}", workspace=workspace) == 2, (command, flag)
        (message,) = error_lines(capsys.readouterr().err)
        assert f"must be a finite number, got {value}" in message, (command, flag, message)
    assert snapshot(workspace) == before
    assert workspace.families(workspace.run_or_latest().run_id) == families


def test_run_with_a_nan_setting_leaves_no_dataset_behind(small_run, tmp_path: Path, capsys) -> None:
    workspace = Workspace(tmp_path / "empty")
    assert cli.main(["run", str(small_run.corpus), "--lr", "nan", "--workspace", str(workspace.path)]) == 2
    assert "lr must be a finite number" in error_lines(capsys.readouterr().err)[0]
    assert workspace.datasets() == []


def test_training_that_diverges_saves_no_run() -> None:
    with pytest.raises(TrainingError, match="Training diverged"):
        quality_metrics(float("nan"), float("nan"), [True], 1, 1, 0)
    assert "nothing was saved" in DIVERGED


# -- 6. unbounded replies ---------------------------------------------------------------------------------------


def labeller_for(fake: FakeOllama, **settings: float) -> OllamaLabeller:
    return OllamaLabeller(OllamaConfig(host=fake.url, **{"timeout_s": 5.0, "max_retries": 0, **settings}))


def test_a_huge_label_is_refused_and_never_printed_whole(fake_ollama: FakeOllama) -> None:
    fake_ollama.responder = lambda request: json.dumps({"label": "Arsenal" + "x" * 1_000_000, "description": "d"})
    with labeller_for(fake_ollama) as labeller, pytest.raises(LabellingError) as raised:
        labeller.label_feature(EVIDENCE, [])
    assert f"at most {MAX_LABEL_CHARS} are allowed" in str(raised.value) and len(str(raised.value)) < 400


def test_a_reply_larger_than_the_bound_is_not_read(fake_ollama: FakeOllama) -> None:
    def two_hundred_megabytes(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(200 * 2**20))
        handler.end_headers()
        for _ in range(200 * 16):
            handler.wfile.write(b" " * 65_536)

    fake_ollama.raw_chat = two_hundred_megabytes
    started = time.monotonic()
    with labeller_for(fake_ollama) as labeller, pytest.raises(LabellingError) as raised:
        labeller.label_feature(EVIDENCE, [])
    assert f"larger than {MAX_REPLY_BYTES:,} bytes" in str(raised.value)
    assert time.monotonic() - started < 10


def test_a_server_dribbling_one_byte_at_a_time_is_given_up_on_after_the_timeout(fake_ollama: FakeOllama) -> None:
    def dribble(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", "1000")
        handler.end_headers()
        for _ in range(1000):
            handler.wfile.write(b" ")
            handler.wfile.flush()
            if fake_ollama.stopping.wait(0.5):
                return

    fake_ollama.raw_chat = dribble
    started = time.monotonic()
    with labeller_for(fake_ollama, timeout_s=2.0) as labeller, pytest.raises(LabellingError) as raised:
        labeller.label_feature(EVIDENCE, [])
    assert "did not answer within 2 s" in str(raised.value)
    assert time.monotonic() - started < 6


def test_a_manual_label_or_description_past_the_bound_is_refused(workspace: Workspace) -> None:
    run_id = workspace.run_or_latest().run_id
    before = len(workspace.interpretations(run_id))
    for label, description in (("x" * (MAX_LABEL_CHARS + 1), ""), ("fine", "y" * 1_000_000)):
        with pytest.raises(SettingsError, match="shorten them"):
            save_manual_label(workspace, run_id, 0, label, description)
    assert len(workspace.interpretations(run_id)) == before


# -- 3. lists in tables -----------------------------------------------------------------------------------------


def test_a_parquet_list_column_is_stored_and_read_back_with_every_item(small_run, tmp_path: Path) -> None:
    articles = pd.read_parquet(small_run.corpus).head(3)
    lists = [list(range(2000)), [7], []]
    path = tmp_path / "with_lists.parquet"
    pq.write_table(pa.table({"id": articles["id"], "text": articles["text"], "positions": lists}), path)
    workspace = Workspace(tmp_path / "workspace")
    dataset_id, _ = pipeline.ingest(workspace, [path], "lists", IngestConfig(id_column="id"))

    stored = workspace.metadata(dataset_id)["positions"].tolist()
    assert [json.loads(value) for value in stored] == lists
    assert "..." not in stored[0]


def test_a_list_typed_text_column_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    path = tmp_path / "paragraphs.parquet"
    pq.write_table(pa.table({"id": ["a", "b"], "paragraphs": [["one", "two"], ["three"]], "n": [1, 2]}), path)
    workspace = Workspace(tmp_path / "workspace")
    with pytest.raises(IngestError, match="column 'paragraphs' holds lists, not text"):
        pipeline.ingest(workspace, [path], "x", IngestConfig(text_column="paragraphs", id_column="id"))
    assert workspace.datasets() == []


# -- 5. encodings -------------------------------------------------------------------------------------------------

RUSSIAN = [
    "Футбольный клуб «Спартак» выиграл чемпионат России.",
    "Болельщики праздновали победу всю ночь на улицах Москвы.",
]
JAPANESE = ["東京の天気は晴れです。今日は多くの人が公園で花見を楽しみました。", "経済ニュースでは円安が続いています。"]
ENCODED = [
    ("cp1251", RUSSIAN, "cp1251"),
    ("koi8_r", [text.replace("«", "").replace("»", "") for text in RUSSIAN], "koi8_r"),
    ("euc_jp", JAPANESE, "euc_jis_2004"),
    ("shift_jis", JAPANESE, "cp932"),
    ("utf_16_le", RUSSIAN, "utf_16_le"),
    ("utf_16_le", JAPANESE, "utf_16_le"),
]


@pytest.mark.parametrize(("encoding", "texts", "detected"), ENCODED)
def test_files_in_other_encodings_are_stored_as_the_right_text(
    tmp_path: Path, encoding: str, texts: list[str], detected: str
) -> None:
    table = "id,text\n" + "".join(f"{number},{text}\n" for number, text in enumerate(texts, start=1))
    on_disk = tmp_path / "notes.csv"  # read from disk in batches (the command line)
    on_disk.write_bytes(table.encode(encoding))
    uploaded = ("notes.txt", "\n\n".join(texts).encode(encoding))  # read whole (an upload)
    workspace = Workspace(tmp_path / "workspace")
    for source, expected in ((on_disk, texts), (uploaded, ["\n\n".join(texts)])):
        dataset_id, report = pipeline.ingest(workspace, [source], config=IngestConfig(id_column="id"))
        assert workspace.documents(dataset_id)["text"].tolist() == expected
        assert f"not UTF-8, decoded as {detected}" in " ".join(report.warnings)


# -- 7. labelling families while they are rebuilt -----------------------------------------------------------------


def test_labelling_families_never_undoes_a_rebuild_that_lands_meanwhile(
    workspace: Workspace, fake_ollama: FakeOllama, monkeypatch
) -> None:
    """Every read of the families is followed at once by a rebuild with other settings (as if another session
    rebuilt them right then): whatever the labelling batch read, the set stored at the end is the last rebuild's,
    as its stage record says, and the labels made for unchanged families are on it."""

    run_id = workspace.run_or_latest().run_id
    run = pipeline.load_run(workspace, run_id)
    read = Workspace.families
    settings = iter([FamilyConfig(iterations=1), FamilyConfig(iterations=3)] * 20)
    rebuilding = []

    def read_then_rebuild(self: Workspace, run_id: str) -> list:
        families = read(self, run_id)
        if not rebuilding:
            rebuilding.append(True)
            pipeline.rebuild_families(self, run_id, next(settings))
            rebuilding.clear()
        return families

    monkeypatch.setattr(Workspace, "families", read_then_rebuild)
    summary = labelling.label_groups(workspace, run, "family", OllamaConfig(host=fake_ollama.url), LabelConfig())
    monkeypatch.undo()

    last = [stage for stage in workspace.stages(run.record.dataset_id, run_id) if stage.stage == "families"][-1]
    stored = workspace.families(run_id)
    assert [family.members for family in stored] == [
        f.members for f in find_families(run.codes, FamilyConfig(**last.config))
    ]
    assert len(stored) == last.summary["n_families"]
    assert summary.n_labelled > 0 and any(family.label_source == "llama3.2" for family in stored)


# -- 4. damaged tables --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_runs(small_run, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """The small run's workspace with a second run trained after it: (folder, first run, second run)."""

    workspace = small_run.copy(tmp_path_factory.mktemp("two_runs") / "workspace")
    second = pipeline.train_run(workspace, small_run.dataset_id, dataclasses.replace(SMALL_SAE, seed=1)).run_id
    return workspace.path, small_run.run.run_id, second


def damaged_copy(two_runs: tuple[Path, str, str], to: Path, table: str, how: str) -> Workspace:
    """A copy of `two_runs` whose table's newest data file is cut in half or removed."""
    shutil.copytree(two_runs[0], to)
    newest = max((to / "lancedb" / f"{table}.lance" / "data").glob("*.lance"), key=lambda path: path.stat().st_mtime)
    if how == "truncated":
        os.truncate(newest, newest.stat().st_size // 2)
    else:
        newest.unlink()
    return Workspace(to)


DAMAGED = [
    (table, how) for table in ("features", "activations", "documents", "datasets") for how in ("truncated", "removed")
]


@pytest.mark.parametrize(("table", "how"), DAMAGED)
def test_a_damaged_table_is_named_everything_else_still_lists_and_repair_restores_it(
    two_runs, tmp_path: Path, table: str, how: str, capsys
) -> None:
    workspace = damaged_copy(two_runs, tmp_path / "workspace", table, how)
    _, first, second = two_runs
    damage = f"The workspace's {table} table cannot be read"

    assert cli_main("list", workspace=workspace) == 0  # no traceback: what can be read is listed
    listed = capsys.readouterr().out
    assert first in listed and second in listed
    assert (damage in listed) == (table in ("features", "datasets"))  # list reads those two
    assert cli_main("export", "--run", first, "--out", str(tmp_path / "before"), workspace=workspace) == 2
    assert damage in error_lines(capsys.readouterr().err)[0]
    assert set(workspace.damaged_tables()) == {table}

    assert cli_main("repair", workspace=workspace) == 0
    repaired = capsys.readouterr().out
    assert repaired.startswith(f"{table}: damaged (") and "restored its version" in repaired
    assert workspace.damaged_tables() == {}
    assert cli_main("list", workspace=workspace) == 0 and "warning" not in capsys.readouterr().out
    if table in ("features", "activations"):  # the second run's rows were in the damaged file: the first run is whole
        assert f"run {second}: its {table} are lost" in repaired
        assert cli_main("export", "--run", first, "--out", str(tmp_path / "after"), workspace=workspace) == 0
    if table == "datasets":  # its record comes back from the ingest stage record
        assert "restored from its ingest stage record" in repaired
        assert cli_main("export", "--run", second, "--out", str(tmp_path / "after"), workspace=workspace) == 0


def test_a_run_hidden_by_a_lost_runs_table_version_is_named_kept_and_restored(two_runs, tmp_path: Path, capsys) -> None:
    shutil.copytree(two_runs[0], tmp_path / "workspace")
    workspace = Workspace(tmp_path / "workspace")
    _, first, second = two_runs
    config, metrics = workspace.run(second).config, workspace.run(second).metrics
    newest = min((workspace.path / "lancedb" / "sae_runs.lance" / "_versions").glob("*.manifest"))
    newest.unlink()  # LanceDB names versions so that the newest sorts first
    assert [run.run_id for run in workspace.runs()] == [first]

    assert cli_main("list", workspace=workspace) == 0
    assert f"warning: run {second} is stored but missing from the runs table" in capsys.readouterr().out
    dataset_id = workspace.run(first).dataset_id
    pipeline.train_run(workspace, dataset_id, dataclasses.replace(SMALL_SAE, seed=2))  # removes abandoned runs first
    assert (workspace.path / "runs" / second / "sae.safetensors").exists()  # a hidden run is not abandoned

    assert cli_main("repair", workspace=workspace) == 0
    assert f"run {second}: its record was missing from the runs table" in capsys.readouterr().out
    assert workspace.run(second).metrics == metrics and workspace.run(second).config == config
    assert cli_main("export", "--run", second, "--out", str(tmp_path / "export"), workspace=workspace) == 0


# -- 8. other findings --------------------------------------------------------------------------------------------


def test_the_documents_of_a_killed_ingest_are_removed_by_the_next_ingest_and_the_daily_clean_up(
    tmp_path: Path, corpora_dir: Path, small_run
) -> None:
    folder = tmp_path / "workspace"
    ingest = Running(
        "ingest", str(corpora_dir / "ag_news_test.parquet"), "--text-column", "text", "--id-column", "id",
        "--batch-rows", "50", workspace=folder,
    )  # fmt: skip
    data = folder / "lancedb" / "documents.lance" / "data"
    deadline = time.monotonic() + 120
    while not (data.is_dir() and len(list(data.glob("*.lance"))) >= 3):  # a few batches stored
        assert ingest.process.poll() is None and time.monotonic() < deadline, ingest.stderr.decode()
        time.sleep(0.05)
    ingest.kill()
    left = Workspace(folder).db.open_table("documents").count_rows()
    assert left >= 100 and Workspace(folder).datasets() == []
    shutil.copytree(folder, tmp_path / "copy")

    Workspace(folder).reclaim_space()  # the daily clean-up
    assert Workspace(folder).db.open_table("documents").count_rows() == 0
    workspace = Workspace(tmp_path / "copy")  # the next ingest
    _, report = pipeline.ingest(workspace, [small_run.corpus], config=IngestConfig(id_column="id"))
    assert workspace.db.open_table("documents").count_rows() == report.n_documents == 60
    assert not list((workspace.path / "ingests").iterdir())


def test_export_counts_the_themes_stored_when_a_kill_cut_off_their_record(workspace: Workspace, tmp_path: Path) -> None:
    run_id = workspace.run_or_latest().run_id
    themes = workspace.themes(run_id)
    workspace.save_themes(run_id, themes[:3])  # saved, then killed before the themes stage record
    pipeline.export_run(workspace, run_id, tmp_path / "export")
    config = json.loads((tmp_path / "export" / "config.json").read_text())
    assert config["metrics"]["n_themes"] == 3 == len(json.loads((tmp_path / "export" / "themes.json").read_text()))
    assert config["metrics"]["n_families"] == len(workspace.families(run_id))


@pytest.mark.parametrize("host", ["http://h:notaport", "http://u:pw-secret@[::1", "http://h:99999"])
def test_a_malformed_host_is_refused_as_a_setting(workspace: Workspace, host: str, capsys) -> None:
    assert cli_main("label", "--ollama-host", host, workspace=workspace) == 2
    stderr = capsys.readouterr().err
    (message,) = error_lines(stderr)
    assert "is not a valid URL" in message and "pw-secret" not in stderr and "Traceback" not in stderr


def test_csv_downloads_neutralise_formulas_in_column_names_too() -> None:
    frame = pd.DataFrame({"=1+2": ["=1+1"], "@SUM(A1)": [3], "plain": ["-x"]})
    header, row = spreadsheet_csv(frame).splitlines()
    assert header == "'=1+2,'@SUM(A1),plain"
    assert row == "'=1+1,3,'-x"


def test_label_exits_with_an_error_when_every_feature_tried_failed(
    workspace: Workspace, fake_ollama: FakeOllama, capsys
) -> None:
    fake_ollama.responder = lambda request: "not json"
    features = workspace.features(workspace.run_or_latest().run_id)
    active = ",".join(str(f) for f in features.loc[features["density"] > 0, "feature_id"].head(2))
    args = ("label", "--ollama-host", fake_ollama.url, "--features", active, "--max-retries", "0")
    assert cli_main(*args, workspace=workspace) == 2
    (message,) = error_lines(capsys.readouterr().err)
    assert "No features could be labelled: all 2 tried failed" in message


def test_embedding_on_a_missing_gpu_names_the_missing_gpu(workspace: Workspace, capsys) -> None:
    assert cli_main("embed", "--device", "cuda", workspace=workspace) == 2
    (message,) = error_lines(capsys.readouterr().err)
    assert message == 'error: Device "cuda" was asked for but no CUDA GPU is available here; use "auto" or "cpu".'


def test_a_corpus_of_one_repeated_text_and_one_other_gets_two_themes_without_warnings(
    tmp_path: Path, bbc: pd.DataFrame, recwarn
) -> None:
    texts = [bbc["text"].iloc[0]] * 59 + [bbc["text"].iloc[1]]
    workspace = Workspace(tmp_path / "workspace")
    dataset_id, _ = pipeline.ingest(workspace, [("same.csv", pd.DataFrame({"text": texts}).to_csv().encode())])
    pipeline.embed_dataset(workspace, dataset_id)
    summary = pipeline.train_run(workspace, dataset_id, dataclasses.replace(SMALL_SAE, holdout_fraction=0.0))
    assert summary.n_themes == 2 and summary.metrics["features_kept"] >= SMALL_SAE.k  # both texts' directions
    assert [str(warning.message) for warning in recwarn] == []


CHINESE = [
    "今天北京的天气很好。很多人去公园散步。",
    "上海的经济发展很快。新的公司不断出现。",
    "这场足球比赛非常精彩。球迷们都很高兴。",
    "学校明天开始放假。学生们准备回家过年。",
    "科学家发现了一种新的治疗方法。",
]
DNA = "Sample {n}: sequence ACGTTGCAAGGCTTAACCGGTA read from the sample; sequence quality high."


def test_a_group_of_wordless_documents_is_not_named_after_the_few_with_words(bbc: pd.DataFrame) -> None:
    """A theme of 40 Chinese documents (no spaces between words) and 6 DNA records: named "(no shared words)", not
    "sequence sample · sequence · sample"; a group of BBC articles keeps its words."""
    chinese = [f"{CHINESE[i % 5]}{CHINESE[(i + 1) % 5]}{CHINESE[(i * 3) % 5]}" for i in range(40)]
    texts = bbc["text"].head(100).tolist() + chinese + [DNA.format(n=n) for n in range(6)]
    members = np.zeros((2, len(texts)), np.float32)
    members[0, 100:] = 1  # the Chinese and DNA documents
    members[1, :30] = 1  # BBC articles
    vectors = embed_texts(texts, EmbedConfig())
    labels = keyword_labels(texts, sp.csr_matrix(members), vectors, lambda terms: embed_texts(terms, EmbedConfig()))
    assert labels["label"][0].startswith(UNNAMED_LABEL) and "sequence" not in labels["label"][0]
    assert not labels["label"][1].startswith(UNNAMED_LABEL)


def workbook_with_shared_strings(n_strings: int) -> bytes:
    """An .xlsx of two rows whose shared strings table holds n_strings distinct texts (written as a stream)."""
    main = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    rels = "http://schemas.openxmlformats.org/package/2006/relationships"
    office = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    parts = {
        "[Content_Types].xml": '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        '<Override PartName="/xl/workbook.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
        '<Override PartName="/xl/worksheets/sheet1.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>'
        '<Override PartName="/xl/sharedStrings.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/></Types>',
        "_rels/.rels": f'<Relationships xmlns="{rels}"><Relationship Id="rId1" Type="{office}/officeDocument" '
        'Target="xl/workbook.xml"/></Relationships>',
        "xl/workbook.xml": f'<workbook xmlns="{main}" xmlns:r="{office}"><sheets><sheet name="S" sheetId="1" '
        'r:id="rId1"/></sheets></workbook>',
        "xl/_rels/workbook.xml.rels": f'<Relationships xmlns="{rels}"><Relationship Id="rId1" '
        f'Type="{office}/worksheet" Target="worksheets/sheet1.xml"/><Relationship Id="rId2" '
        f'Type="{office}/sharedStrings" Target="sharedStrings.xml"/></Relationships>',
        "xl/worksheets/sheet1.xml": f'<worksheet xmlns="{main}"><sheetData><row r="1"><c r="A1" t="s"><v>0</v></c>'
        '</row><row r="2"><c r="A2" t="s"><v>1</v></c></row></sheetData></worksheet>',
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in parts.items():
            archive.writestr(name, text)
        with archive.open("xl/sharedStrings.xml", "w") as strings:
            strings.write(f'<sst xmlns="{main}">'.encode())
            for start in range(0, n_strings, 100_000):
                block = range(start, min(start + 100_000, n_strings))
                strings.write("".join(f"<si><t>note {i}</t></si>" for i in block).encode())
            strings.write(b"</sst>")
    return out.getvalue()


def test_a_workbook_of_millions_of_shared_strings_is_refused_before_they_are_read(tmp_path: Path) -> None:
    workbook = workbook_with_shared_strings(SHARED_STRINGS_PER_ROW * MAX_ROWS + 1)
    workspace = Workspace(tmp_path / "workspace")
    started = time.monotonic()
    with pytest.raises(IngestError, match="holds more than 4,000,000 distinct texts"):
        pipeline.ingest(workspace, [("notes.xlsx", workbook)])
    assert time.monotonic() - started < 60 and workspace.datasets() == []
    small = workbook_with_shared_strings(2)  # the same workbook with its two texts reads
    dataset_id, _ = pipeline.ingest(workspace, [("notes.xlsx", small)], config=IngestConfig(text_column="note 0"))
    assert workspace.documents(dataset_id)["text"].tolist() == ["note 1"]
