"""prisma_core.reading.explore on a small hand-made run: the family level is each family's strongest member; a
document's concepts split into strong and weak."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import scipy.sparse as sp

from prisma_core.interpret.keywords import KEYWORD_SOURCE
from prisma_core.reading.explore import level_units, refract_document, split_strong
from prisma_core.store import NamedFamily


def test_family_level_is_the_strongest_strong_activation_among_the_members():
    """A document contains a concept where its activation is strong (at least a quarter of the document's largest):
    the first document's feature 1 (1 of 5) is too weak to put it in family b, or to count at the feature level."""
    codes = sp.csr_matrix(np.array([[0, 1, 0, 3, 0, 5], [6, 0, 8, 0, 10, 0]], dtype=np.float32))
    families = [
        NamedFamily(7, 0, 3, [3, 5], [(3, 5, 0.5)], "a", KEYWORD_SOURCE),
        NamedFamily(9, 0, 1, [1, 2, 4], [(1, 2, 0.5), (1, 4, 0.5)], "b", KEYWORD_SOURCE),
    ]
    run = SimpleNamespace(codes=codes, families=families, features=pd.DataFrame())
    matrix, units = level_units(run, "family")
    assert matrix.toarray().tolist() == [[5, 0], [0, 10]]
    assert units.to_dict("list") == {"unit": [7, 9], "label": ["a", "b"]}
    run.features = pd.DataFrame({"feature_id": range(6), "label": list("uvwxyz"), "hidden": [False] * 6})
    features, _ = level_units(run, "feature")
    assert features.toarray().tolist() == [[0, 0, 0, 3, 0, 5], [6, 0, 8, 0, 10, 0]]


def test_a_documents_concepts_split_into_strong_and_weak_against_the_strongest_one_shown():
    codes = sp.csr_matrix(np.array([[0.0, 8.0, 1.0, 2.0, 4.0]], np.float32))
    features = pd.DataFrame(
        {
            "feature_id": [0, 1, 2, 3, 4],
            "label": ["a", "b", "c", "d", "e"],
            "found_in": [3, 3, 2, 3, 1],
            "hidden": [False, False, False, False, False],
        }
    )
    run = SimpleNamespace(codes=codes, features=features)
    refraction = refract_document(run, 0)
    assert refraction.columns.tolist() == ["feature_id", "value", "strong", "label", "found_in"]
    strong, weak = split_strong(refraction)
    assert (strong["feature_id"].tolist(), weak["feature_id"].tolist()) == ([1, 4, 3], [2])
    hidden = SimpleNamespace(codes=codes, features=features.assign(hidden=features["feature_id"] == 1))
    strong, weak = split_strong(refract_document(hidden, 0))  # the strongest shown is now 4.0: 1.0 reaches its 25%
    assert (strong["feature_id"].tolist(), weak["feature_id"].tolist()) == ([4, 3, 2], [])
