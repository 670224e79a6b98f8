"""Labelling against a misbehaving server, a families rebuild racing a labelling batch, labels past their
bounds, and documents that share no words (round 3).
"""

import gzip
import json
import time
import tracemalloc
import zlib
from http.server import BaseHTTPRequestHandler

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from ollama_server import FakeOllama, _chat_reply
from reliability_helpers import cli_main, error_lines

from prisma_core import pipeline
from prisma_core.concepts.families import FamilyConfig, find_families
from prisma_core.embed import EmbedConfig, embed_texts
from prisma_core.errors import LabellingError, SettingsError
from prisma_core.interpret.keywords import UNNAMED_LABEL, keyword_labels
from prisma_core.interpret.manual_labels import save_manual_label
from prisma_core.interpret.ollama_client import MAX_REPLY_BYTES
from prisma_core.interpret.ollama_config import OllamaConfig
from prisma_core.interpret.ollama_labeller import OllamaLabeller
from prisma_core.interpret.prompts import MAX_LABEL_CHARS
from prisma_core.pipeline import labelling
from prisma_core.pipeline.labelling.job import LabelConfig
from prisma_core.store import Workspace
from prisma_core.store.groups import Groups
from prisma_core.store.stages import FAMILIES

EVIDENCE = ["Arsenal beat Chelsea at the Emirates.", "Arsenal fans celebrated the cup run.", "Arsenal won again."]


# -- unbounded replies ------------------------------------------------------------------------------------------------


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


def gzip_bomb(inflated_mb: int) -> bytes:
    """A gzip body of zeros that inflates to `inflated_mb` MB (a thousandth of that, compressed)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(2**20)
    return b"".join(compressor.compress(zeros) for _ in range(inflated_mb)) + compressor.flush()


def test_a_compressed_reply_is_bounded_once_inflated(fake_ollama: FakeOllama) -> None:
    bomb = gzip_bomb(256)
    assert len(bomb) < MAX_REPLY_BYTES

    def gzip_bomb_reply(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Encoding", "gzip")
        handler.send_header("Content-Length", str(len(bomb)))
        handler.end_headers()
        handler.wfile.write(bomb)

    fake_ollama.raw_chat = gzip_bomb_reply
    tracemalloc.start()
    try:
        with labeller_for(fake_ollama) as labeller, pytest.raises(LabellingError) as raised:
            labeller.label_feature(EVIDENCE, [])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert f"larger than {MAX_REPLY_BYTES:,} bytes" in str(raised.value)
    assert peak < 16 * 2**20  # never more than a few inflated pieces at once (256 MB before)

    def brotli_reply(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Encoding", "br")
        handler.send_header("Content-Length", "4")
        handler.end_headers()
        handler.wfile.write(b"\x0b\x01\x80\x03")

    fake_ollama.raw_chat = brotli_reply
    with (
        labeller_for(fake_ollama) as labeller,
        pytest.raises(LabellingError, match=r"encoding Prisma does not read \(br\)"),
    ):
        labeller.label_feature(EVIDENCE, [])
    fake_ollama.raw_chat = None
    small = gzip.compress(
        json.dumps(_chat_reply("llama3.2", json.dumps({"label": "Arsenal", "description": "d"}), True)).encode()
    )

    def gzipped_answer(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Encoding", "gzip")
        handler.send_header("Content-Length", str(len(small)))
        handler.end_headers()
        handler.wfile.write(small)

    fake_ollama.raw_chat = gzipped_answer  # a well-behaved compressed reply is read as before
    with labeller_for(fake_ollama) as labeller:
        assert labeller.label_feature(EVIDENCE, []).label == "Arsenal"


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
    before = len(workspace.labels.of(run_id))
    for label, description in (("x" * (MAX_LABEL_CHARS + 1), ""), ("fine", "y" * 1_000_000)):
        with pytest.raises(SettingsError, match="shorten it"):
            save_manual_label(workspace, run_id, 0, label, description)
    assert len(workspace.labels.of(run_id)) == before


# -- labelling families while they are rebuilt ------------------------------------------------------------------------


def test_labelling_families_never_undoes_a_rebuild_that_lands_meanwhile(
    workspace: Workspace, fake_ollama: FakeOllama, monkeypatch
) -> None:
    """Every read of the families is followed at once by a rebuild with other settings (as if another session
    rebuilt them right then): whatever the labelling batch read, the set stored at the end is the last rebuild's,
    as its stage record says, and the labels made for unchanged families are on it."""

    run_id = workspace.run_or_latest().run_id
    run = pipeline.load_run(workspace, run_id)
    read = Groups.families
    settings = iter([FamilyConfig(iterations=1), FamilyConfig(iterations=3)] * 20)
    rebuilding = []

    def read_then_rebuild(self: Groups, run_id: str) -> list:
        families = read(self, run_id)
        if not rebuilding:
            rebuilding.append(True)
            pipeline.rebuild_families(workspace, run_id, next(settings))
            rebuilding.clear()
        return families

    monkeypatch.setattr(Groups, "families", read_then_rebuild)
    summary = labelling.label_groups(
        workspace, run, "family", labelling.ollama_labeller(OllamaConfig(host=fake_ollama.url)), LabelConfig()
    )
    monkeypatch.undo()

    last = [stage for stage in workspace.stage_records.of(run.record.dataset_id, run_id) if stage.stage == FAMILIES][-1]
    stored = workspace.groups.families(run_id)
    assert [family.members for family in stored] == [
        f.members for f in find_families(run.codes, FamilyConfig(**last.config))
    ]
    assert len(stored) == last.summary["n_families"]
    assert summary.n_labelled > 0 and any(family.label_source == "llama3.2" for family in stored)


def test_label_exits_with_an_error_when_every_feature_tried_failed(
    workspace: Workspace, fake_ollama: FakeOllama, capsys
) -> None:
    fake_ollama.responder = lambda request: "not json"
    features = workspace.feature_stats.of(workspace.run_or_latest().run_id)
    active = ",".join(str(f) for f in features.loc[features["density"] > 0, "feature_id"].head(2))
    args = ("label", "--ollama-host", fake_ollama.url, "--features", active, "--max-retries", "0")
    assert cli_main(*args, workspace=workspace) == 2
    (message,) = error_lines(capsys.readouterr().err)
    assert "No features could be labelled: all 2 tried failed" in message


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
