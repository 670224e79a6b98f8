"""Features that come back: several SAEs trained on the same documents, and the features most of them share.

An SAE trained twice from different random starts learns different features (Paulo & Belrose, 2025): a feature one
training finds, another may split in two, merge with a neighbour or never find. A run therefore trains
`SAEConfig.n_trainings` SAEs, each seeded from the run's seed, and keeps only the features more than half of them
find (`prisma_core.sae.recurrence.matched_features`: mutual best matches of their activations at
`SAEConfig.match_at`). A kept feature's weights are the mean of its matches' weights, so it is the trainings'
common version of the feature, and it records in how many trainings it was found. Kept features are ordered densest
first, so the nested groups stay broad-to-fine; `train.train_compared` then polishes them together.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
import torch

from prisma_core.errors import TrainingError
from prisma_core.sae.model import TopKSAE
from prisma_core.sae.recurrence import matched_features


def training_seeds(seed: int, n_trainings: int) -> list[int]:
    """Independent seeds, one per training, drawn from the run's seed (numpy's SeedSequence spawning): two runs with
    different seeds share no training seed."""
    children = np.random.SeedSequence(seed).spawn(n_trainings)
    return [int(child.generate_state(1, np.uint32)[0]) for child in children]


def combine(
    models: Sequence[TopKSAE], codes: Sequence[sp.csr_matrix], at_least: int, match_at: float, k: int
) -> tuple[TopKSAE, np.ndarray]:
    """The SAE of the features found in at least `at_least` of the trainings (matched at activation correlation
    `match_at`), and in how many each was found.

    models: the trainings' SAEs (same d, k and number of latents); codes: each one's codes [n_documents, n_latents]
    of the same training documents. Pairs of trainings can share more features between them than one training has;
    the run keeps no more than one training's number, those found in the most trainings first. Where no more than k
    are found in `at_least` (documents nearly all alike), the features found in the most of the other trainings, two
    at least, fill in to k + 1, each with its own count. Raises TrainingError when even then no more than k features
    are kept (the run describes each document by k of them).
    """
    everywhere = max(k, 2) + 1
    matched = matched_features(codes, match_at)
    groups = [group for group in matched if len(group) >= at_least]
    if len(groups) < everywhere:
        fewer = sorted((group for group in matched if 2 <= len(group) < at_least), key=len, reverse=True)
        groups += fewer[: everywhere - len(groups)]
    if len(groups) < everywhere:
        raise TrainingError(
            f"Only {len(groups)} features came back in 2 or more of the {len(models)} trainings, too few to describe "
            f"each document by {k}. The documents may be too few or too alike: train with fewer features, a smaller "
            "k, or more documents."
        )
    density = [np.diff(sp.csc_matrix(own).indptr) for own in codes]
    mean_density = np.array([np.mean([density[t][f] for t, f in group.items()]) for group in groups])
    found_in = np.array([len(group) for group in groups])
    kept = np.lexsort((-mean_density, -found_in))[: models[0].n_latents]
    kept = kept[np.argsort(-mean_density[kept], kind="stable")]
    return _averaged(models, [groups[i] for i in kept]), found_in[kept].astype(np.int32)


def _averaged(models: Sequence[TopKSAE], groups: Sequence[dict[int, int]]) -> TopKSAE:
    """A TopK SAE whose latent i has the mean weights of group i's features; b_pre is the trainings' mean."""
    first = models[0]
    combined = TopKSAE(first.d, len(groups), first.k)

    def mean_rows(name: str) -> torch.Tensor:
        rows = [torch.stack([getattr(models[t], name).detach()[f] for t, f in group.items()]) for group in groups]
        return torch.stack([stacked.mean(dim=0) for stacked in rows])

    with torch.no_grad():
        combined.W_dec.copy_(mean_rows("W_dec"))
        combined.normalize_decoder()
        combined.W_enc.copy_(mean_rows("W_enc"))
        combined.b_enc.copy_(mean_rows("b_enc"))
        combined.b_pre.copy_(torch.stack([model.b_pre.detach() for model in models]).mean(dim=0))
    return combined.to(first.W_dec.device)
