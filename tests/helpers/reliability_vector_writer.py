"""`python tests/helpers/reliability_vector_writer.py WORKSPACE START VALUE`: another process saving vectors.

Saves constant vectors (every value VALUE) for every dataset of the workspace, in order, starting at the wall-clock
time START (after the imports), so that writers started one after the other really write at the same moment.
Imports only the store, to start quickly.
"""

import sys
import time

import numpy as np

from prisma_core.store import Workspace

VECTOR_KEY = "stress-model|fp32"
VECTOR_DIM = 8


def main(workspace_path: str, start: str, value: str) -> int:
    workspace = Workspace(workspace_path)
    datasets = workspace.datasets()
    time.sleep(max(0.0, float(start) - time.time()))
    for dataset in datasets:
        vectors = np.full((dataset.n_documents, VECTOR_DIM), float(value), dtype=np.float32)
        workspace.save_vectors(dataset.dataset_id, VECTOR_KEY, vectors)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
