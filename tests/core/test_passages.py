"""Passages (embed/passages.py, store/passages.py, pipeline/document_passages.py): spans of a document cut at sentence
ends inside one model window, pooled in the same forward pass as the document vectors, stored by text hash before the
vectors, read through the pipeline or computed there on demand. The real model and a real LanceDB workspace."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench import common
from prisma_core import pipeline
from prisma_core.embed import DEFAULT_MODEL, EmbedConfig, embed_documents, model_key, plan_chunks
from prisma_core.embed.model import describe, load_model, resolve_model_path
from prisma_core.embed.passages import MAX_PASSAGE_TOKENS, MIN_LAST_TOKENS, MIN_PASSAGE_TOKENS
from prisma_core.embed.torch_backend import torch_pooler
from prisma_core.errors import EmbeddingError, NotFoundError
from prisma_core.pipeline import document_passages, passage_cap
from prisma_core.store import Passages, Workspace
from prisma_core.store.datasets import text_hash

REPO = Path(__file__).resolve().parents[2]
TORCH = EmbedConfig(precision="fp32", backend="torch")
OPENVINO = EmbedConfig(precision="fp32", backend="openvino")
ODD_TEXTS = [
    "Chest pain.",
    "a",
    "\u200b",  # no token at all
    "...!!!",
    "Line one of a list\nLine two of a list\n\n\nLine three",
    "x" * 300,  # one word longer than the tokenizer splits
    "Caf\u00e9 na\u00efve \U0001f642 \u2014 \u201cquoted.\u201d Next sentence here.",
]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", a, b) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.fixture(scope="module")
def model():
    return load_model(DEFAULT_MODEL, "cpu", "fp32")


@pytest.fixture(scope="module")
def texts(bbc: pd.DataFrame, model) -> list[str]:
    """A BBC article of three model windows, four short ones and the odd texts."""
    lengths = [
        len(ids) for ids in model.tokenizer(bbc["text"].head(300).tolist(), add_special_tokens=False)["input_ids"]
    ]
    long = next(text for text, n in zip(bbc["text"], lengths, strict=False) if 2.5 * 254 < n <= 3 * 254)
    return [long, *bbc["text"].iloc[[1, 2, 3, 4]], *ODD_TEXTS]


@pytest.fixture(scope="module")
def embedded(texts):
    return embed_documents(texts, TORCH, passages=True)


def content_positions(model, ids: list[int]) -> np.ndarray:
    """Where a window's content tokens are: the bundled model wraps each window in [CLS] ... [SEP]."""
    assert (ids[0], ids[-1]) == (model.tokenizer.cls_token_id, model.tokenizer.sep_token_id)
    return np.arange(1, len(ids) - 1)


def test_passages_cover_every_content_token_once_inside_one_window(model, texts):
    chunking = plan_chunks(describe(model), texts, passages=True)
    spans = chunking.passages
    assert chunking.chunks_per_doc[0] == 3  # a document longer than a window
    assert np.array_equal(np.unique(spans.window), np.arange(len(chunking.chunk_ids)))  # every window has passages
    assert np.all(np.diff(spans.window) >= 0)
    n_tokens = np.bincount(chunking.chunk_owner[spans.window], weights=spans.n_tokens, minlength=len(texts))
    assert n_tokens.tolist() == chunking.tokens_per_doc.tolist()
    for window, ids in enumerate(chunking.chunk_ids):
        rows = np.flatnonzero(spans.window == window)
        tokens, pooled, content = spans.tokens[rows], spans.pooled[rows], content_positions(model, ids)
        covered = np.concatenate([np.arange(first, stop) for first, stop in tokens])
        assert covered.tolist() == content.tolist()  # contiguous, in order, each content token once
        assert pooled[0, 0] == 0 and pooled[-1, 1] == len(ids)  # the special tokens pooled with the window's edges
        assert pooled[1:, 0].tolist() == tokens[1:, 0].tolist() and pooled[:-1, 1].tolist() == tokens[:-1, 1].tolist()
        sizes = tokens[:, 1] - tokens[:, 0]
        assert sizes.max() <= MAX_PASSAGE_TOKENS + MIN_LAST_TOKENS - 1
        assert (sizes[:-1] >= MIN_PASSAGE_TOKENS).all()
        assert len(sizes) == 1 or sizes[-1] >= MIN_LAST_TOKENS


def test_character_spans_slice_the_text_to_the_passages_words(model, texts, embedded):
    passages = embedded.passages
    spans = embedded.chunking.passages
    whole_words = 0
    for row in range(len(passages)):
        text = texts[passages.position[row]]
        start, end = int(passages.start[row]), int(passages.end[row])
        piece = text[start:end]
        assert 0 <= start <= end <= len(text) and piece == piece.strip()
        if row + 1 < len(passages) and passages.position[row + 1] == passages.position[row]:
            assert text[end : passages.start[row + 1]].strip() == ""  # nothing but white space between passages
        at_word_edges = (start == 0 or text[start - 1].isspace()) and (end == len(text) or text[end].isspace())
        if at_word_edges and passages.n_tokens[row]:
            ids = embedded.chunking.chunk_ids[spans.window[row]][spans.tokens[row, 0] : spans.tokens[row, 1]]
            assert model.tokenizer(piece, add_special_tokens=False)["input_ids"] == ids
            whole_words += 1
    assert whole_words >= 0.8 * len(passages)  # the others start or end where a window splits a word


def test_passages_end_at_sentence_ends_and_line_breaks_and_are_cut_at_words_without_them(model):
    sentence = "The committee met again on Tuesday to discuss the new budget for the regional hospitals."
    lines = "\n".join(f"item {n} of the inventory list for the storage room" for n in range(20))
    text = " ".join([sentence] * 12)
    short = " ".join([sentence] * 2) + " Yes."
    documents = [text, lines, " ".join(["word"] * 300), short]
    embedded = embed_documents(documents, TORCH, passages=True)
    passages = embedded.passages
    by_document = [passages.take(passages.position == document) for document in range(len(documents))]
    first = by_document[0]
    assert all(documents[0][s:e].endswith(".") for s, e in zip(first.start, first.end, strict=True))
    assert (first.n_tokens[:-1] >= MIN_PASSAGE_TOKENS).all()
    listed = by_document[1]
    assert all(lines[e] == "\n" for e in listed.end[:-1])  # each ends where a line does
    assert by_document[2].n_tokens.tolist() == [96, 96, 62, 46]  # no sentence: cut by 96 tokens; a second window
    assert by_document[3].n_tokens.tolist() == [embedded.chunking.tokens_per_doc[3]]  # "Yes." joins the passage


def test_a_windows_passages_pool_back_to_the_windows_own_vector(model, texts):
    """Mean pooling over a window is the mean of its passages' means weighted by their pooled tokens; a document of
    one passage has its document vector as its passage vector."""
    chunking = plan_chunks(describe(model), texts, passages=True)
    pool = torch_pooler(model)
    for window, ids in enumerate(chunking.chunk_ids):
        _, spans = chunking.passages.in_windows([window])
        pooled = pool([ids], spans)
        weights = (spans[:, 2] - spans[:, 1])[:, None]
        combined = (pooled.span_means * weights).sum(axis=0) / weights.sum()
        assert cosines(combined[None], pooled.sentences)[0] >= 0.9999
    embedded = embed_documents(texts, TORCH, passages=True)
    single = np.flatnonzero(np.bincount(embedded.passages.position, minlength=len(texts)) == 1)
    assert len(single) >= len(ODD_TEXTS)
    np.testing.assert_allclose(
        embedded.passages.vectors[np.isin(embedded.passages.position, single)], embedded.vectors[single], atol=1e-5
    )


@pytest.mark.parametrize("config", [TORCH, OPENVINO], ids=["torch", "openvino"])
def test_document_vectors_are_the_same_with_and_without_passages(texts, config):
    without = embed_documents(texts, config)
    with_passages = embed_documents(texts, config, passages=True)
    assert without.passages is None and with_passages.passages is not None
    np.testing.assert_array_equal(with_passages.vectors, without.vectors)


def test_torch_and_openvino_passages_agree(texts, embedded):
    openvino = embed_documents(texts, OPENVINO, passages=True).passages
    for field in ("position", "number", "start", "end", "n_tokens"):
        assert getattr(openvino, field).tolist() == getattr(embedded.passages, field).tolist()
    assert cosines(openvino.vectors, embedded.passages.vectors).min() >= 0.9999
    np.testing.assert_allclose(np.linalg.norm(openvino.vectors, axis=1), 1.0, atol=1e-5)  # normalised like documents


def test_odd_texts_have_one_passage_each_within_their_text(texts, embedded):
    passages = embedded.passages
    for index, text in enumerate(texts[-len(ODD_TEXTS) :], start=len(texts) - len(ODD_TEXTS)):
        own = passages.take(passages.position == index)
        assert len(own) == 1 and own.number.tolist() == [0]
        assert 0 <= own.start[0] <= own.end[0] <= len(text)
    empty = passages.take(passages.position == texts.index("\u200b"))
    assert empty.n_tokens.tolist() == [0] and (empty.start[0], empty.end[0]) == (0, 1)  # the whole text, no token


def test_a_model_that_does_not_pool_by_the_mean_has_no_passages(tmp_path):
    bundled = Path(resolve_model_path(DEFAULT_MODEL))
    folder = tmp_path / "cls_model"
    shutil.copytree(bundled, folder, ignore=shutil.ignore_patterns("*.safetensors"))
    (folder / "model.safetensors").symlink_to(bundled / "model.safetensors")
    pooling = folder / "1_Pooling" / "config.json"
    pooling.write_text(
        json.dumps(
            json.loads(pooling.read_text()) | {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}
        )
    )
    config = EmbedConfig(model=str(folder), precision="fp32", backend="torch")
    embedded = embed_documents(["A short note."], config, passages=True)
    assert embedded.passages is None and embedded.vectors.shape == (1, 384)
    with pytest.raises(EmbeddingError, match="mean"):
        pipeline.passages_of_texts(["A short note."], config)


# -- stored, resumed, read and computed on demand through the pipeline ------------------------------------------


def openings_dataset(workspace: Workspace, bbc: pd.DataFrame, rows: list[int]) -> tuple[str, list[str]]:
    """A dataset of the openings (first 150 words: one window) of these BBC articles, and their texts."""
    texts = [" ".join(text.split()[:150]) for text in bbc["text"].iloc[rows]]
    documents = pd.DataFrame({"doc_id": [str(row) for row in rows], "text": texts})
    return workspace.add_dataset("openings", documents, ["openings"], {}), texts


def assert_same_passages(found: Passages, expected: Passages) -> None:
    for field in ("position", "number", "start", "end", "n_tokens"):
        assert getattr(found, field).tolist() == getattr(expected, field).tolist(), field
    assert cosines(found.vectors, expected.vectors).min() >= 0.99999  # stored at float16


KILL_AT_SECOND_VECTORS = """
import os, signal, sys
from prisma_core import pipeline
from prisma_core.store import Workspace
workspace = Workspace(sys.argv[1])
save_vectors, calls = workspace.save_vectors, []
def killed_at_the_second_slices_vectors(*args, **kwargs):
    calls.append(1)
    if len(calls) == 2:
        os.kill(os.getpid(), signal.SIGKILL)  # after the second slice's passages are stored, before its vectors
    return save_vectors(*args, **kwargs)
workspace.save_vectors = killed_at_the_second_slices_vectors
pipeline.embed_dataset(workspace, sys.argv[2], slice_documents=4)
"""


def test_each_slices_passages_are_stored_before_its_vectors_and_a_killed_embedding_resumes(tmp_path, bbc):
    workspace = Workspace(tmp_path / "ws")
    dataset_id, texts = openings_dataset(workspace, bbc, list(range(10)))
    environment = os.environ | {"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    killed = subprocess.run(
        [sys.executable, "-c", KILL_AT_SECOND_VECTORS, str(workspace.path), dataset_id],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    workspace = Workspace(tmp_path / "ws")
    key = model_key(EmbedConfig())
    assert workspace.stored_positions(dataset_id, key) == set(range(4))
    hashes = [text_hash(text) for text in texts]
    stored = workspace.passages.cached(key, hashes)
    assert sorted(set(stored.position.tolist())) == list(range(8))  # two slices' passages, one slice's vectors

    resumed = pipeline.embed_dataset(workspace, dataset_id, slice_documents=4)
    assert (resumed.n_computed, resumed.n_cached) == (6, 4)
    expected = pipeline.passages_of_texts(texts)
    written_twice = int(np.isin(expected.position, [4, 5, 6, 7]).sum())  # the slice killed before its vectors
    assert workspace.passages.rows(key) == len(expected) + written_twice
    assert_same_passages(pipeline.passages(workspace, dataset_id), expected)  # ... read once
    np.testing.assert_allclose(workspace.vectors(dataset_id, key), embed_documents(texts).vectors, atol=1e-5)


def test_passages_of_documents_without_them_are_computed_once_then_read(tmp_path, bbc, monkeypatch):
    """Vectors seeded from the shared corpus's parquet: embedding stores no passages; the pipeline computes them
    when asked, stores them, and reads them afterwards without the model."""
    workspace = Workspace(tmp_path / "ws")
    lengths = bbc["text"].str.len()
    rows = [int(np.flatnonzero(lengths.between(3200, 3600))[0]), 0, 1, 2, 0]  # three windows; a text twice
    documents = pd.DataFrame({"doc_id": [f"d{i}" for i in range(5)], "text": bbc["text"].iloc[rows].tolist()})
    dataset_id = workspace.add_dataset("bbc", documents, ["bbc"], {})
    config = common.cache_corpus_vectors(workspace, dataset_id, "bbc_news")
    summary = pipeline.embed_dataset(workspace, dataset_id, config)
    assert (summary.n_computed, summary.n_passages, workspace.passages.rows(model_key(config))) == (0, 0, 0)

    events = []
    found = pipeline.passages(workspace, dataset_id, config=config, progress=events.append)
    texts = documents["text"].tolist()
    assert_same_passages(found, pipeline.passages_of_texts(texts, config))
    assert events[-1].done == events[-1].total == 5 and events[-1].stage == "passages"
    assert workspace.passages.rows(model_key(config)) == int((found.position != 4).sum())  # the repeated text once
    assert (found.position == 0).sum() > 6  # several windows' passages

    computed = []

    def recorded(*args, **kwargs):  # the real embedding, recorded
        computed.append(args)
        return embed_documents(*args, **kwargs)

    monkeypatch.setattr(document_passages, "embed_documents", recorded)
    again = pipeline.passages(workspace, dataset_id, [4, 1, 1], config=config)
    assert computed == []
    assert sorted(set(again.position.tolist())) == [1, 4]
    assert_same_passages(again, found.take(np.isin(found.position, [1, 4])))
    monkeypatch.setattr(document_passages, "WINDOW_DOCUMENTS", 2)  # a large dataset's way: a window at a time
    batches = list(pipeline.passage_batches(workspace, dataset_id, config=config))
    assert sorted(sorted(set(batch.position.tolist())) for batch in batches) == [[0, 1], [2, 3], [4]]
    assert_same_passages(pipeline.passages(workspace, dataset_id, config=config), found)
    with pytest.raises(NotFoundError, match="no document at position 5"):
        pipeline.passages(workspace, dataset_id, [5], config=config)


def test_passages_past_the_cap_are_computed_when_asked_and_not_stored(tmp_path, bbc, monkeypatch):
    workspace = Workspace(tmp_path / "ws")
    dataset_id, texts = openings_dataset(workspace, bbc, list(range(6)))
    expected = pipeline.passages_of_texts(texts)
    per_text = np.bincount(expected.position)
    monkeypatch.setattr(passage_cap, "MAX_STORED_PASSAGES", int(per_text[:3].sum()) + 1)
    summary = pipeline.embed_dataset(workspace, dataset_id, slice_documents=2)
    key = model_key(EmbedConfig())
    assert summary.n_passages == workspace.passages.rows(key) == per_text[:3].sum()  # whole texts, first ones first
    assert_same_passages(pipeline.passages(workspace, dataset_id), expected)
    assert workspace.passages.rows(key) == per_text[:3].sum()  # the rest computed, not stored


def test_deleting_a_dataset_removes_only_the_passages_no_other_dataset_needs(tmp_path, bbc):
    workspace = Workspace(tmp_path / "ws")
    kept, kept_texts = openings_dataset(workspace, bbc, [0, 1])
    deleted, deleted_texts = openings_dataset(workspace, bbc, [1, 2])
    for dataset_id in (kept, deleted):
        pipeline.embed_dataset(workspace, dataset_id)
    key = model_key(EmbedConfig())
    workspace.delete_dataset(deleted)
    hashes = [text_hash(text) for text in [*kept_texts, deleted_texts[1]]]
    assert sorted(set(workspace.passages.cached(key, hashes).position.tolist())) == [0, 1]
