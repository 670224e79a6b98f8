"""`python tests/helpers/reliability_vector_writer.py WORKSPACE START VALUE`: another process saving vectors.

Saves constant vectors (every value VALUE) for every dataset of the workspace, in order, once every process of
the start line START is ready (start_line.py), so that writers started one after the other really write at the same
moment. Imports only the store, to start quickly.
"""

import sys

import numpy as np
from start_line import wait_at

from prisma_core.store import Workspace

VECTOR_KEY = "stress-model|fp32"
VECTOR_DIM = 8


def main(workspace_path: str, start: str, value: str) -> int:
    workspace = Workspace(workspace_path)
    datasets = workspace.datasets()
    wait_at(start)
    for dataset in datasets:
        vectors = np.full((dataset.n_documents, VECTOR_DIM), float(value), dtype=np.float32)
        workspace.save_vectors(dataset.dataset_id, VECTOR_KEY, vectors)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
