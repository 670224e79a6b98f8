"""A faster precision only where it stays faithful on the dataset itself (embed/faithful.py,
pipeline/embedding_choice.py): the real model at int8, bf16 and fp32 on real texts, candidates forced so every CPU
runs the check (bf16, emulated and slow on CPUs without it, on a few texts only)."""

from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from prisma_core import pipeline
from prisma_core.embed import COSINE_FLOOR, DEFAULT_MODEL, EmbedConfig, embed_texts, faithful, model_key
from prisma_core.embed.faithful import at_precision, faithful_choice, fast_candidates, first_window_vectors
from prisma_core.store import Workspace
from prisma_core.store.stages import EMBEDDING

AUTO = EmbedConfig()


def sampled(corpus: pd.DataFrame) -> list[str]:
    texts = corpus["text"].tolist()
    return [texts[position] for position in faithful.sample_positions(len(texts))]


def test_the_sample_spreads_over_the_dataset_and_a_short_document_is_its_first_window(ag_news):
    positions = faithful.sample_positions(7_600)
    assert len(positions) == faithful.SAMPLE_DOCUMENTS and (positions[0], positions[-1]) == (0, 7_599)
    assert faithful.sample_positions(5).tolist() == [0, 1, 2, 3, 4]
    texts = ag_news["text"].head(6).tolist()  # a few dozen words: one window each
    fp32 = at_precision(AUTO, "fp32")
    np.testing.assert_allclose(first_window_vectors(fp32, texts), embed_texts(texts, fp32), atol=1e-5)


@pytest.mark.parametrize("corpus", ["bbc", "mtsamples", "ag_news"])
def test_int8_on_a_sample_of_each_corpus_is_chosen_only_within_the_floor(corpus, request):
    texts = sampled(request.getfixturevalue(corpus))
    choice = faithful_choice(AUTO, texts, candidates=("int8",))
    assert choice.n_checked == len(texts) == faithful.SAMPLE_DOCUMENTS
    if choice.precision == "int8":
        assert choice.backend == "openvino" and COSINE_FLOOR <= choice.lowest_cosine < 0.9999  # really quantized
        assert choice.reason == (
            f"int8 passed: lowest cosine to full precision {choice.lowest_cosine:.4f} on 32 of this dataset's documents"
        )
    else:  # a CPU whose int8 moves a document of this corpus too far
        assert choice.precision == "fp32" and choice.reason.startswith("int8 refused: ")
        assert f" < {COSINE_FLOOR}; fp32 chosen" in choice.reason


def test_a_candidate_below_the_floor_is_refused_with_its_reason_and_the_next_faithful_one_chosen(mtsamples):
    texts = mtsamples["text"].head(4).tolist()
    int8 = faithful_choice(AUTO, texts, floor=-1.0, candidates=("int8",)).lowest_cosine
    floor = round((int8 + 1) / 2, 6)  # above int8's lowest, below what bf16 keeps (about 0.9999)

    choice = faithful_choice(AUTO, texts, floor=floor, candidates=("int8", "bf16"))
    assert (choice.precision, choice.backend) == ("bf16", at_precision(AUTO, "bf16").backend)
    assert floor <= choice.lowest_cosine <= 1 + 1e-6
    assert choice.reason.startswith(f"int8 refused: one document at {int8:.4f} < {floor}; bf16 passed: ") or (
        choice.reason.startswith("int8 refused: ")
        and f"documents at {int8:.4f} < {floor}; bf16 passed: " in choice.reason
    )
    assert model_key(choice.config(AUTO)) == f"{DEFAULT_MODEL}|openvino-bf16"

    neither = faithful_choice(AUTO, texts[:2], floor=1.001, candidates=("int8", "bf16"))
    assert (neither.precision, neither.backend) == ("fp32", at_precision(AUTO, "fp32").backend)
    assert neither.reason.startswith("int8 refused: ") and "; bf16 refused: " in neither.reason
    assert neither.reason.endswith("; fp32 chosen")
    assert model_key(neither.config(AUTO)) == model_key(EmbedConfig(precision="fp32", backend="openvino"))


def test_a_precision_set_by_hand_is_used_as_set_without_a_check():
    assert fast_candidates(EmbedConfig(precision="int8")) == []
    for precision in ("fp32", "int8"):
        choice = faithful_choice(EmbedConfig(precision=precision), ["any text"])
        assert (choice.precision, choice.reason, choice.n_checked) == (
            precision,
            f"{precision} as set in the embedding settings",
            0,
        )


def test_a_dataset_is_embedded_at_what_its_own_sample_allows_and_its_record_says_why(tmp_path: Path, bbc, monkeypatch):
    workspace = Workspace(tmp_path / "workspace")
    documents = pd.DataFrame({"doc_id": bbc["id"].head(40).astype(str), "text": bbc["text"].head(40)})
    dataset_id = workspace.add_dataset("bbc", documents, ["bbc"], {})
    candidates = fast_candidates(AUTO)  # this machine's: int8 and bf16 where the CPU has them, else none

    summary = pipeline.embed_dataset(workspace, dataset_id, AUTO)
    choice = summary.choice
    assert summary.embedding_key == model_key(choice.config(AUTO))
    assert workspace.has_vectors(dataset_id, summary.embedding_key)
    record = [stage for stage in workspace.stage_records.of(dataset_id) if stage.stage == EMBEDDING][-1]
    assert record.summary["choice"] == asdict(choice) and record.config["precision"] == "auto"
    assert pipeline.precision_choice(workspace, dataset_id, AUTO) == choice  # read back from the record
    assert model_key(pipeline.dataset_config(workspace, dataset_id, AUTO)) == summary.embedding_key
    assert pipeline.suggested_sae_config(workspace, dataset_id).n_features > 0  # training finds the same space
    if candidates:
        assert choice.n_checked == 32 and choice.precision in (*candidates, "fp32")
        assert choice.lowest_cosine >= COSINE_FLOOR or choice.precision == "fp32"
    else:
        assert choice.reason == f"{choice.precision}: this computer has no faster precision to try"

    monkeypatch.setattr(faithful, "COSINE_FLOOR", 1.001)  # no precision but fp32 is faithful enough now
    others = pd.DataFrame({"doc_id": bbc["id"].iloc[40:52].astype(str), "text": bbc["text"].iloc[40:52]})
    strict = pipeline.embed_dataset(workspace, workspace.add_dataset("bbc more", others, ["bbc"], {}), AUTO)
    assert strict.embedding_key == f"{DEFAULT_MODEL}|openvino-fp32"  # the shared corpora's space
    assert strict.choice.precision == "fp32"
    assert [part.split(" refused")[0] for part in strict.choice.reason.split("; ")[:-1]] == candidates
