import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from bbc_openings import BbcOpenings

from prisma_core.embed import EmbedConfig, embed_texts
from prisma_core.errors import SettingsError
from prisma_core.interpret.keyword_labeller import KeywordLabeller
from prisma_core.interpret.keywords import (
    INACTIVE_LABEL,
    SEPARATOR,
    UNNAMED_LABEL,
    KeywordConfig,
    corpus_terms,
    keyword_labels,
    top_document_members,
)
from prisma_core.interpret.labeller import Labeller, LabelRequest, LabelResult
from prisma_core.store import Workspace

CATEGORIES = ["business", "entertainment", "politics", "sport", "tech"]
EVERY_TERM = KeywordConfig(n_candidates=100_000, n_description_terms=100_000)
"""Every term that passes the rules is a candidate and is listed in the description: a word missing from it was
refused by a rule, not crowded out by stronger terms (used on classes of a few articles, so the lists stay short)."""


def embed(texts: list[str]) -> np.ndarray:
    return embed_texts(texts, EmbedConfig(batch_size=256))


def category_members(labels, extra_units: int = 1) -> sp.csr_matrix:
    """[5 + extra_units, n_docs]: one unit per BBC category, holding exactly its articles; extra units are empty."""
    cols = np.arange(len(labels))
    rows = np.array([CATEGORIES.index(label) for label in labels])
    return sp.csr_matrix((np.ones(len(labels), np.float32), (rows, cols)), shape=(5 + extra_units, len(labels)))


@pytest.fixture(scope="module")
def bbc_sample(bbc_openings: BbcOpenings):
    """40 articles per BBC category, cut to their openings (one model window: it names the topic), and their real
    embeddings: the first 40 of each desk of the session's embedded openings."""
    sample = bbc_openings.corpus.groupby("label").head(40)
    return sample.reset_index(drop=True), bbc_openings.vectors()[sample.index]


def test_labels_name_planted_topics_with_unique_readable_terms(bbc_sample):
    sample, vectors = bbc_sample
    labels = keyword_labels(sample["text"].tolist(), category_members(sample["label"]), vectors, embed)
    assert labels["unit"].tolist() == list(range(6))
    assert (labels["source"] == "keywords").all()
    named = dict(zip(CATEGORIES, labels["label"][:5], strict=True))
    descriptions = dict(zip(CATEGORIES, labels["description"][:5], strict=True))
    sport_words = ("match", "champion", "cup", "players", "coach", "win", "game", "team", "season", "injury")
    assert any(word in descriptions["sport"] for word in sport_words), descriptions["sport"]
    assert any(w in descriptions["tech"] for w in ("users", "technology", "software", "mobile", "computer", "digital"))
    assert any(w in descriptions["politics"] for w in ("labour", "election", "party", "blair", "government", "tory"))
    assert labels.loc[5, "label"] == INACTIVE_LABEL
    assert labels["label"].is_unique
    for label in named.values():
        terms = label.split(SEPARATOR)
        assert len(terms) == 3
        words = " ".join(terms).split()
        assert all(len(word) >= 3 and word.isalpha() for word in words), label
        assert not {"the", "and", "said", "year"} & set(words), label


def test_the_keyword_labeller_names_one_unit_from_its_documents_positions_without_their_texts(bbc_sample, tmp_path):
    sample, vectors = bbc_sample
    labeller: Labeller = KeywordLabeller(
        Workspace(tmp_path / "ws"), sample["text"].tolist(), vectors, EmbedConfig(batch_size=256), KeywordConfig()
    )
    sport = np.flatnonzero(sample["label"] == "sport")
    result = labeller.label(LabelRequest("theme", sport))  # no texts: keywords count the corpus's words

    alone = sp.csr_matrix((np.ones(len(sport)), (np.zeros(len(sport), int), sport)), shape=(1, len(sample)))
    [expected] = keyword_labels(sample["text"].tolist(), alone, vectors, embed).itertuples()
    assert result == LabelResult(expected.label, expected.description, "keywords", "")
    assert labeller.source == "keywords"
    sport_words = ("match", "champion", "cup", "players", "coach", "win", "game", "team", "season", "injury")
    assert any(word in result.description for word in sport_words), result.description


def with_word(texts: pd.Series, word: str, rows: list[int]) -> list[str]:
    """The texts with the word appended to the given rows."""
    return [f"{text} {word}" if row in rows else text for row, text in enumerate(texts)]


def described_terms(description: str) -> set[str]:
    """The terms a keyword description lists ("Words its strongest documents share: a, b, c.")."""
    listed = description.removeprefix("Words its strongest documents share: ").removesuffix(".")
    return set(listed.split(", "))


def first_of_each_category(labels: pd.Series, n_per_category: int) -> sp.csr_matrix:
    """[5, n_docs]: one unit per BBC category, holding its first n_per_category articles."""
    rows = [CATEGORIES.index(label) for label in labels]
    kept = [doc for doc, row in enumerate(rows) if rows[:doc].count(row) < n_per_category]
    units = [rows[doc] for doc in kept]
    return sp.csr_matrix((np.ones(len(kept), np.float32), (units, kept)), shape=(5, len(labels)))


def test_a_term_must_be_shared_by_several_class_documents(bbc_sample):
    """A name that appears in one class document only (a person, debris) never becomes a label term; in two it does."""
    sample, vectors = bbc_sample
    members = first_of_each_category(sample["label"], n_per_category=2)
    sport = members[CATEGORIES.index("sport")].indices.tolist()
    tech = members[CATEGORIES.index("tech")].indices.tolist()
    once = with_word(sample["text"], "Zxqvbrandt Zxqvbrandt", [sport[0], tech[0]])  # twice, yet one sport article
    in_both = with_word(sample["text"], "Zxqvbrandt", sport)
    once_labels = keyword_labels(once, members, vectors, embed, EVERY_TERM)
    shared_labels = keyword_labels(in_both, members, vectors, embed, EVERY_TERM)
    assert not once_labels["description"].str.contains("zxqvbrandt").any()
    assert "zxqvbrandt" in described_terms(shared_labels.loc[CATEGORIES.index("sport"), "description"])


def test_words_common_in_every_class_are_never_candidates(bbc_sample):
    """A word in 60% of all documents and in every class document says nothing about any class; the same word in the
    sport class only names sport."""
    sample, vectors = bbc_sample
    members = first_of_each_category(sample["label"], n_per_category=3)
    common = sorted(set(members.indices.tolist()) | {row for row in range(len(sample)) if row % 5 < 3})
    assert len(common) >= 0.6 * len(sample)
    everywhere = keyword_labels(with_word(sample["text"], "Zephyrquote", common), members, vectors, embed, EVERY_TERM)
    assert not everywhere["description"].str.contains("zephyrquote").any()
    assert not everywhere["label"].str.startswith(UNNAMED_LABEL).any()
    sport = members[CATEGORIES.index("sport")].indices.tolist()
    in_sport = keyword_labels(with_word(sample["text"], "Zephyrquote", sport), members, vectors, embed, EVERY_TERM)
    assert "zephyrquote" in described_terms(in_sport.loc[CATEGORIES.index("sport"), "description"])


def test_units_with_the_same_documents_get_labels_that_differ(bbc_sample):
    sample, vectors = bbc_sample
    members = category_members(sample["label"], extra_units=0)
    doubled = sp.vstack([members, members[3]]).tocsr()  # unit 5 holds exactly the sport articles, as unit 3 does
    labels = keyword_labels(sample["text"].tolist(), doubled, vectors, embed)
    assert labels["label"].is_unique
    sport, twin = labels.loc[3, "label"].split(SEPARATOR), labels.loc[5, "label"].split(SEPARATOR)
    assert sport[:2] == twin[:2] and sport[2] != twin[2]


def test_documents_without_shared_words_are_said_so_not_called_inactive(bbc_sample):
    sample, _ = bbc_sample
    chinese = ["数据科学是一门跨学科的领域它使用科学方法", "机器学习模型需要大量的训练数据才能表现良好"] * 3
    dna = "ACGT" * 50_000
    texts = sample["text"].tolist()[:20] + chinese + [dna, dna]
    vectors = embed(texts)
    members = sp.csr_matrix(
        ([1.0] * 8, ([0] * 6 + [1] * 2, list(range(20, 28)))), shape=(2, len(texts)), dtype=np.float32
    )
    labels = keyword_labels(texts, members, vectors, embed)
    assert labels["label"].tolist() == [f"{UNNAMED_LABEL} #0", f"{UNNAMED_LABEL} #1"]
    assert labels["description"].str.contains("share no distinctive word").all()


def test_a_vocabulary_or_description_of_no_words_is_refused_when_the_settings_are_made():
    with pytest.raises(SettingsError, match=r"max_vocabulary must be a whole number between 1 and 10000000, got 0"):
        KeywordConfig(max_vocabulary=0)
    with pytest.raises(SettingsError, match=r"n_description_terms must be a whole number between 1 and 100000, got -1"):
        KeywordConfig(n_description_terms=-1)


def test_top_document_members_keeps_the_strongest_active_documents():
    codes = sp.csr_matrix(np.array([[0.9, 0.0], [0.1, 0.0], [0.5, 0.0], [0.0, 0.0]], dtype=np.float32))
    members = top_document_members(codes, n_top=2)
    assert members.shape == (2, 4)
    assert members[0].indices.tolist() == [0, 2]
    assert members[1].nnz == 0


def test_terms_counted_once_give_the_labels_of_the_texts(bbc_sample):
    sample, vectors = bbc_sample
    texts, members = sample["text"].tolist(), category_members(sample["label"])
    terms = corpus_terms(texts, KeywordConfig())
    assert terms.presence_of(np.arange(len(texts))).shape == (len(texts), len(terms.vocabulary))
    from_terms = keyword_labels(terms, members, vectors, embed)
    pd.testing.assert_frame_equal(from_terms, keyword_labels(texts, members, vectors, embed))
