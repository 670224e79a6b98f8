"""The SAE's starting point: b_pre at the geometric median of the training rows (the documents, and their passages
where they train too) and, with `init="data"`, the decoder directions at k-means centres of those rows (each nested
feature group at as many groups of rows). k-means on all of BBC's 26,500 rows takes most of a default training's time;
on a sample of 4,096 of them, fewer features came back when trained again (BENCHMARKS.md section 7)."""

import warnings
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.cluster import KMeans
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning

from prisma_core.sae.config import SAEConfig
from prisma_core.sae.model import TopKSAE
from prisma_core.store.vectors import unit_rows

MEDIAN_SAMPLE = 4096
"""Training documents the initial b_pre (geometric median) is computed from."""
INIT_SAMPLE = 16_384
"""Training rows the data-initialised directions (k-means centres) are computed from, at most."""
KMEANS_ITERATIONS = 50
"""Lloyd iterations of each k-means of the data-initialised directions: a starting point, not a final grouping."""
KMEANS_COMPONENTS = 50
"""Principal components the data-initialising k-means groups documents on."""
BROAD_GROUP = 128
"""Nested feature groups of fewer features than this are broad: their k-means keeps the best of BROAD_RESTARTS."""
BROAD_RESTARTS = 10


def initial_model(
    dim: int,
    n_train: int,
    config: SAEConfig,
    generator: torch.Generator,
    training_rows: Callable[[np.ndarray], torch.Tensor],
) -> TopKSAE:
    """Tied weights; b_pre at the geometric median of (a sample of) the training data; directions random, or with
    config.init "data" the centres of the training documents around b_pre (`data_directions`).

    training_rows: indices into the training documents -> their scaled vectors [m, d] on the CPU."""
    model = TopKSAE(dim, config.n_features, config.k, generator=generator)
    sample = torch.randperm(n_train, generator=generator)[:MEDIAN_SAMPLE].numpy()
    with torch.no_grad():
        model.b_pre.copy_(geometric_median(training_rows(sample)))
        if config.init == "data":
            sample = np.sort(torch.randperm(n_train, generator=generator)[:INIT_SAMPLE].numpy())
            centred = (training_rows(sample) - model.b_pre).numpy()
            seed = int(torch.randint(2**31 - 1, (1,), generator=generator))
            directions = torch.from_numpy(data_directions(centred, config.prefixes(), seed))
            model.W_dec[: len(directions)] = directions
            model.W_enc[: len(directions)] = directions
    return model


_SAME_POINT_DECIMALS = 4


def data_directions(centred: np.ndarray, prefixes: tuple[int, ...], seed: int) -> np.ndarray:
    """Unit directions [n, d] from documents centred on b_pre [m, d]: each nested feature group (`prefixes`, the
    group sizes, smallest first) gets the mean directions of as many k-means groups of documents as it adds
    features, so the first features start at the broadest directions and later ones at finer ones. Fewer than n
    when a group asks for more centres than there are distinct documents (the rest keep their random start; copies
    of one text embedded in different batches differ by float rounding, so points are compared to 4 decimals; where
    copies still fall on both sides of a rounding step, k-means leaves a group empty, whose direction is zero).

    k-means runs on the documents' first principal components (the grouping is the same, several times faster), and
    the broad groups' k-means keeps the best of BROAD_RESTARTS starts: the broadest directions of a corpus are then
    found alike from any seed."""
    unit = unit_rows(centred)
    points = PCA(min(KMEANS_COMPONENTS, *unit.shape), random_state=seed).fit_transform(unit)
    n_distinct = len(np.unique(points.round(_SAME_POINT_DECIMALS), axis=0))
    found, start = [], 0
    for size in prefixes:
        wanted = min(size - start, n_distinct)
        restarts = BROAD_RESTARTS if wanted < BROAD_GROUP else 1
        with warnings.catch_warnings():  # "fewer distinct clusters than n_clusters": the empty groups, as above
            warnings.simplefilter("ignore", ConvergenceWarning)
            kmeans = KMeans(wanted, n_init=restarts, max_iter=KMEANS_ITERATIONS, random_state=seed).fit(points)
        members = sp.csr_matrix((np.ones(len(unit)), (kmeans.labels_, np.arange(len(unit)))), (wanted, len(unit)))
        found.append(unit_rows(np.asarray(members @ unit)))
        if wanted < size - start:
            break
        start = size
    return np.concatenate(found).astype(np.float32)


def geometric_median(points: torch.Tensor, iterations: int = 100, tolerance: float = 1e-7) -> torch.Tensor:
    """Weiszfeld's algorithm: points [m, d] -> the point minimising the sum of distances [d]."""
    points = points.double()
    median = points.mean(dim=0)
    for _ in range(iterations):
        weights = 1.0 / (points - median).norm(dim=1).clamp_min(1e-12)
        updated = (weights[:, None] * points).sum(dim=0) / weights.sum()
        converged = (updated - median).norm() <= tolerance * median.norm().clamp_min(1e-12)
        median = updated
        if converged:
            break
    return median.float()
