"""Sparse codes small enough to count by hand: 6 documents, 4 features, k = 2 active features per document."""

import numpy as np
import scipy.sparse as sp

from prisma_core.sae.weights import codes_matrix

VALUES = np.array([[0.9, 0.1], [0.8, 0.3], [0.5, 0.4], [0.7, 0.2], [0.6, 0.6], [0.2, 0.1]], dtype=np.float32)
INDICES = np.array([[0, 1], [0, 2], [1, 2], [0, 1], [2, 3], [1, 3]], dtype=np.int64)


def toy_codes() -> sp.csr_matrix:
    return codes_matrix(VALUES, INDICES, n_features=4)
