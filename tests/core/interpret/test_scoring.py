from collections.abc import Iterator

import numpy as np
import pytest
from bbc_openings import BbcOpenings
from ollama_server import FakeOllama, running_fake_ollama

from prisma_core.embed import EmbedConfig, embed_texts
from prisma_core.interpret.label_scores import (
    auc_band,
    detection_band,
    one_feature_support,
    roc_auc,
    score_words,
    support_words,
)
from prisma_core.interpret.ollama_config import OllamaConfig
from prisma_core.interpret.ollama_labeller import OllamaLabeller
from prisma_core.interpret.scoring import detection_score, holdout_split

N_PER_SIDE = 50


@pytest.fixture
def fake_ollama() -> Iterator[FakeOllama]:
    with running_fake_ollama() as fake:
        yield fake


def unit_vectors(texts: list[str]) -> np.ndarray:
    """Unit-length embeddings with the bundled model, as the app embeds documents and labels (the process's cached
    model on its default backend)."""
    return embed_texts(texts, EmbedConfig(normalize=True))


@pytest.fixture(scope="module")
def bbc_sport_and_other(bbc_openings: BbcOpenings) -> tuple[np.ndarray, np.ndarray]:
    """Unit-length embeddings [N_PER_SIDE, 384] of sport articles and of articles from the four other sections (their
    openings: enough to tell the topic), from the session's embedded openings."""
    desks = bbc_openings.corpus["label"]
    sport = desks[desks == "sport"].sample(N_PER_SIDE, random_state=0).index
    other = desks[desks != "sport"].sample(N_PER_SIDE, random_state=0).index
    vectors = bbc_openings.vectors()
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return unit[sport], unit[other]


def label_auc(label: np.ndarray, positive: np.ndarray, negative: np.ndarray) -> float:
    """The embedding score of a label: ROC-AUC of its cosine with positive vs negative (unit-norm) documents."""
    return roc_auc(positive @ label, negative @ label)


def test_a_matching_label_scores_high_on_real_news(bbc_sport_and_other):
    sport, other = bbc_sport_and_other
    score = label_auc(unit_vectors(["sport"])[0], sport, other)
    assert score > 0.8


def test_an_unrelated_label_is_near_chance_on_a_random_split(bbc_sport_and_other):
    documents = np.vstack(bbc_sport_and_other)
    order = np.random.default_rng(0).permutation(len(documents))
    first, second = documents[order[:N_PER_SIDE]], documents[order[N_PER_SIDE:]]
    score = label_auc(unit_vectors(["gardening tips"])[0], first, second)
    assert abs(score - 0.5) < 0.15


def test_detection_score_is_the_balanced_accuracy_of_the_answers(fake_ollama):
    """The fake flags documents containing the label: 3 of 4 positives and 1 of 6 negatives."""
    positive = ["alpha one", "alpha two", "alpha three", "a positive the detector misses"]
    negative = ["beta one", "beta two", "beta three", "beta four", "beta five", "an alpha false alarm"]
    with OllamaLabeller(OllamaConfig(host=fake_ollama.url, timeout_s=5.0)) as labeller:
        score = detection_score(labeller, "alpha", positive, negative, seed=3)

    assert score == pytest.approx((3 / 4 + 5 / 6) / 2)
    [prompt] = fake_ollama.user_prompts()
    shown = [text for text in positive + negative if text in prompt]
    assert len(shown) == 10
    assert sorted(shown, key=prompt.index) != positive + negative  # shuffled, not positives first


def test_detection_score_is_one_for_a_perfect_detector_and_reproducible(fake_ollama):
    positive, negative = ["alpha a", "alpha b"], ["beta a", "beta b", "beta c"]
    with OllamaLabeller(OllamaConfig(host=fake_ollama.url, timeout_s=5.0)) as labeller:
        assert detection_score(labeller, "alpha", positive, negative, seed=0) == 1.0
        detection_score(labeller, "alpha", positive, negative, seed=0)
    first, second = fake_ollama.user_prompts()
    assert first == second


def test_holdout_split_keeps_the_evidence_out_of_the_held_out_documents():
    activating = np.array([40, 7, 13, 99, 5, 61, 28, 3, 72, 18])  # by decreasing activation
    evidence, held_out = holdout_split(activating, n_evidence=4, seed=1)

    assert evidence.tolist() == [40, 7, 13, 99]
    assert sorted(held_out.tolist()) == sorted([5, 61, 28, 3, 72, 18])
    assert not set(evidence) & set(held_out)
    assert holdout_split(activating, 4, seed=1)[1].tolist() == held_out.tolist()
    orders = {tuple(holdout_split(activating, 4, seed=seed)[1]) for seed in range(5)}
    assert len(orders) > 1


def test_holdout_split_with_few_documents_and_bad_input():
    evidence, held_out = holdout_split([3, 1], n_evidence=5, seed=0)
    assert evidence.tolist() == [3, 1] and held_out.tolist() == []
    with pytest.raises(ValueError, match="must not repeat"):
        holdout_split([3, 3, 1], n_evidence=1, seed=0)


def test_one_features_scores_rest_on_its_held_out_strong_documents_said_in_words():
    held = one_feature_support(n_strong=100, n_docs=1000, keyword_top_documents=10)
    assert (held.basis, int(held.n_positives[0]), int(held.n_negatives[0])) == (["held_out"], 80, 500)
    assert support_words(held) == (
        "Scores rest on 80 of the feature's documents no labeller was shown against 500 others. Chance is 0.50."
    )
    assert int(one_feature_support(100, 1000, keyword_top_documents=30).n_positives[0]) == 70  # keywords read 30
    low, high = auc_band(0.9, 80, 500)
    assert score_words(0.9, held, detection=False) == f"0.90 ({low:.2f} to {high:.2f}), above chance"
    low, high = detection_band(0.5, 5, 5)
    assert score_words(0.5, held, detection=True) == f"0.50 ({low:.2f} to {high:.2f}), at chance"
    assert score_words(float("nan"), held, detection=False) == "not scored"
    assert score_words(None, held, detection=True) == "not checked"
    in_sample = one_feature_support(n_strong=22, n_docs=1000, keyword_top_documents=10)
    assert in_sample.basis == ["in_sample"]
    assert "all its documents (too few to hold any out)" in support_words(in_sample)
    for too_few in (one_feature_support(3, 1000, 10), one_feature_support(1000, 1000, 10)):
        assert score_words(0.9, too_few, detection=False) == "not enough evidence"
        assert support_words(too_few).startswith("Not enough evidence to score a label")
