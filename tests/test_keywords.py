import numpy as np
import scipy.sparse as sp

from prisma_core.interpret.keywords import INACTIVE_LABEL, family_keyword_label, keyword_labels

CATEGORIES = ["business", "entertainment", "politics", "sport", "tech"]


def category_codes(labels) -> sp.csr_matrix:
    """One feature per BBC category, active (value 1) exactly on that category's articles; feature 5 never fires."""
    rows = np.arange(len(labels))
    cols = np.array([CATEGORIES.index(label) for label in labels])
    return sp.csr_matrix((np.ones(len(labels), dtype=np.float32), (rows, cols)), shape=(len(labels), 6))


def test_keyword_labels_name_planted_topics(bbc):
    sample = bbc.groupby("label").head(40)
    labels = keyword_labels(sample["text"].tolist(), category_codes(sample["label"]))
    assert labels["feature_id"].tolist() == list(range(6))
    assert (labels["source"] == "keywords").all()
    terms = {CATEGORIES[i]: labels.loc[i, "description"] for i in range(5)}
    assert any(word in terms["sport"] for word in ("match", "champion", "olympic", "athletics", "race", "coach"))
    assert any(word in terms["tech"] for word in ("users", "technology", "software", "mobile", "computer", "net"))
    assert any(word in terms["politics"] for word in ("labour", "election", "party", "blair", "government"))
    assert labels.loc[5, "label"] == INACTIVE_LABEL
    assert all(label.count(" · ") == 2 for label in labels["label"][:5])


def test_keyword_labels_ignore_stop_words_and_numbers(bbc):
    sample = bbc.groupby("label").head(20)
    labels = keyword_labels(sample["text"].tolist(), category_codes(sample["label"]))
    words = " ".join(labels["label"]).replace("·", " ").split()
    assert not {"the", "and", "said", "2004"} & set(words) - {"said"}
    assert not any(word.isdigit() for word in words)


def test_family_label_combines_parent_and_child_terms():
    label = family_keyword_label("football · match · goal", ["goal · penalty · keeper", "penalty · referee · card"])
    assert label == "football · match · penalty"
