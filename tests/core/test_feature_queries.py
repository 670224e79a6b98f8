"""Which features a view offers, in what order, and which stand close to one (`prisma_core.reading.feature_queries`), on
the small real run."""

from dataclasses import replace

import numpy as np
import pytest

from prisma_core import pipeline
from prisma_core.reading.feature_queries import (
    MIN_CLOSENESS,
    NEAREST_FEATURES,
    densest_features,
    nearest_active,
    ranked_features,
    shown_feature,
)
from prisma_core.store import Workspace


@pytest.fixture(scope="module")
def run(small_run):
    return pipeline.load_run(Workspace(small_run.path), small_run.run.run_id)


def edited(run, hidden: list[int], pinned: list[int]):
    features = run.features.assign(
        hidden=run.features["feature_id"].isin(hidden), pinned=run.features["feature_id"].isin(pinned)
    )
    return replace(run, features=features)


def test_features_are_offered_pinned_first_then_densest_and_never_hidden(run):
    sparse = run.features.sort_values("density")["feature_id"]
    pinned, hidden = int(sparse.iloc[0]), int(run.features.sort_values("density")["feature_id"].iloc[-1])
    ranked = ranked_features(edited(run, [hidden], [pinned]))
    assert ranked["feature_id"].iloc[0] == pinned
    assert hidden not in set(ranked["feature_id"])
    assert len(ranked) == len(run.features) - 1
    rest = ranked.iloc[1:]
    assert (np.diff(rest["density"].to_numpy()) <= 0).all()
    ties = rest.groupby("density")["feature_id"].apply(lambda ids: ids.is_monotonic_increasing)
    assert ties.all(), "equally dense features by id"


def test_the_open_feature_is_the_one_chosen_while_shown_else_the_first_offered(run):
    densest = int(run.features.sort_values("density", ascending=False)["feature_id"].iloc[0])
    other = int(run.features.sort_values("density")["feature_id"].iloc[0])
    assert shown_feature(run, other) == other
    assert shown_feature(run, None) == densest
    assert shown_feature(edited(run, [other], []), other) == densest
    assert shown_feature(edited(run, [], [other]), None) == other


def test_similar_features_fire_and_are_close_closest_first(run):
    found_any = False
    for feature in run.features["feature_id"]:
        nearest = nearest_active(run, int(feature))
        assert len(nearest) <= NEAREST_FEATURES and int(feature) not in set(nearest["feature_id"])
        cosines = run.directions[nearest["feature_id"].to_numpy()] @ run.directions[int(feature)]
        np.testing.assert_allclose(nearest["cosine"], cosines, rtol=1e-5)
        assert (nearest["cosine"] >= MIN_CLOSENESS).all() and (np.diff(nearest["cosine"]) <= 0).all()
        density = run.features.set_index("feature_id").loc[nearest["feature_id"], "density"]
        assert (density > 0).all()
        found_any |= not nearest.empty
    assert found_any


def test_the_diagnostics_show_the_densest_features(run):
    densest = densest_features(run, 5)
    assert len(densest) == 5
    assert densest["density"].min() >= run.features["density"].nlargest(5).min()
    assert (np.diff(densest["density"].to_numpy()) <= 0).all()
