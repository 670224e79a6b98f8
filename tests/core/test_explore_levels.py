"""prisma_core.explore.level_units on a small hand-made run: the family level is each family's strongest member."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import scipy.sparse as sp

from prisma_core.explore import level_units
from prisma_core.interpret.keywords import KEYWORD_SOURCE
from prisma_core.store import NamedFamily


def test_family_level_is_the_strongest_activation_among_the_members():
    codes = sp.csr_matrix(np.array([[0, 1, 0, 3, 0, 5], [6, 0, 8, 0, 10, 0]], dtype=np.float32))
    families = [
        NamedFamily(7, 0, 3, [3, 5], [(3, 5, 0.5)], "a", KEYWORD_SOURCE),
        NamedFamily(9, 0, 1, [1, 2, 4], [(1, 2, 0.5), (1, 4, 0.5)], "b", KEYWORD_SOURCE),
    ]
    run = SimpleNamespace(codes=codes, families=families, features=pd.DataFrame())
    matrix, units = level_units(run, "family")
    assert matrix.toarray().tolist() == [[5, 1], [0, 10]]
    assert units.to_dict("list") == {"unit": [7, 9], "label": ["a", "b"]}
