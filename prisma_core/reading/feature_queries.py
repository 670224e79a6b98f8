"""Which features a view offers and in what order (the features not hidden, pinned ones first), and the features
that stand for something close to one."""

from __future__ import annotations

import pandas as pd

from prisma_core.concepts import analysis
from prisma_core.names import own_label
from prisma_core.run_shape.loaded_run import LoadedRun

NEAREST_FEATURES = 8
MIN_CLOSENESS = 0.2
"""Closeness (decoder cosine) below which a feature is not called similar: unrelated directions in the bundled
model's 384 dimensions already reach about 0.1 by chance."""


def ranked_features(run: LoadedRun) -> pd.DataFrame:
    """The features not hidden, pinned ones first, then densest first (dead ones last), then by id."""
    shown = run.features[~run.features["hidden"]]
    return shown.sort_values(["pinned", "density", "feature_id"], ascending=[False, False, True])


def densest_features(run: LoadedRun, n: int) -> pd.DataFrame:
    """The n features shown (not hidden) active on the most documents (the diagnostics' heatmaps)."""
    return run.features[~run.features["hidden"]].sort_values("density", ascending=False).head(n)


def shown_feature(run: LoadedRun, chosen: int | None) -> int:
    """The feature to open: `chosen` while the run shows it, else the first of `ranked_features`."""
    ranked = ranked_features(run)["feature_id"]
    if chosen is not None and int(chosen) in set(ranked.tolist()):
        return int(chosen)
    return int(ranked.iloc[0])


def nearest_active(run: LoadedRun, feature_id: int) -> pd.DataFrame:
    """The closest features by decoder cosine among those shown that fire (dead features carry no meaning), at least
    MIN_CLOSENESS close, at most NEAREST_FEATURES: feature_id, cosine, label (without a trailing copy of its
    feature's number), density."""
    alive = run.features.loc[
        (run.features["density"] > 0) & ~run.features["hidden"], ["feature_id", "label", "density"]
    ]
    nearest = analysis.nearest_features(run.directions, feature_id, len(run.features) - 1)
    nearest = nearest[nearest["cosine"] >= MIN_CLOSENESS].merge(alive, on="feature_id", how="inner")
    nearest = nearest.head(NEAREST_FEATURES)
    pairs = zip(nearest["feature_id"], nearest["label"], strict=True)
    return nearest.assign(label=[own_label(feature, label) for feature, label in pairs])
