"""Compare groups with statistics: the ranges, tests and q values against scipy's own one-table functions, the
counts against direct counting, and the verification the issue asks for: groups drawn at random find (almost)
nothing, real groups (the desks of BBC News) find their matching themes with large effects."""

import shutil

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from scipy import stats
from toy_codes import toy_codes

from prisma_core import pipeline
from prisma_core.compare import MAX_Q, MIN_GROUP_SIZE
from prisma_core.compare.prediction import group_predictors
from prisma_core.compare.prevalence import (
    fisher_p_values,
    group_comparison,
    holding,
    p_values,
    q_text,
    range_text,
    ranked,
    share_range,
    summarise,
    verdicts,
)
from prisma_core.ingest import IngestConfig
from prisma_core.reading.explore import level_units
from prisma_core.reading.runs import load_run
from prisma_core.store import Workspace


@pytest.fixture
def codes():
    return toy_codes()


def test_group_comparison_matches_direct_counts(codes):
    groups = pd.Series(["a", "a", "b", "a", "b", "b"])
    frame = group_comparison(codes, groups)
    assert len(frame) == 2 * 4  # every feature is present somewhere, so every (group, feature) pair is tested
    row = frame[(frame["group"] == "a") & (frame["feature_id"] == 0)].iloc[0]
    assert row["n_documents"] == 3 and row["prevalence"] == 1.0 and row["prevalence_rest"] == 0.0
    assert row["difference"] == 1.0 and row["lift"] == 3.0  # the rest's share floored at 1 of 3 documents
    assert frame[frame["group"] == "a"].iloc[0]["feature_id"] == 0
    assert frame[frame["group"] == "b"].iloc[0]["feature_id"] == 3
    b_feature_2 = frame[(frame["group"] == "b") & (frame["feature_id"] == 2)].iloc[0]
    assert b_feature_2["prevalence"] == pytest.approx(2 / 3)
    assert b_feature_2["prevalence_rest"] == pytest.approx(1 / 3)
    assert b_feature_2["n_rest"] == 1 and b_feature_2["rest_size"] == 3
    absent = frame[(frame["group"] == "a") & (frame["feature_id"] == 3)].iloc[0]  # tested although a never has it
    assert absent["n_documents"] == 0 and absent["prevalence_low"] == 0.0 and absent["prevalence_high"] > 0.4
    # 3 of 3 against 0 of 3: Fisher's two-sided p = 2 / C(6, 3) = 0.1, not enough on 6 documents
    assert row["p_value"] == pytest.approx(0.1)
    assert not holding(frame).any()


def test_group_comparison_counts_missing_values_as_a_group(codes):
    groups = pd.Series(["a", None, "a", "a", None, "a"])
    frame = group_comparison(codes, groups)
    assert set(frame["group"]) == {"a", "(missing)"}


def test_ranges_are_scipys_wilson_intervals():
    counts, totals = np.meshgrid(np.arange(0, 41, 3), [1, 7, 40, 41, 500])
    counts, totals = np.minimum(counts, totals).ravel(), totals.ravel()
    low, high = share_range(counts, totals)
    for k, n, lo, hi in zip(counts, totals, low, high, strict=True):
        expected = stats.binomtest(int(k), int(n)).proportion_ci(confidence_level=0.95, method="wilson")
        assert (lo, hi) == pytest.approx((expected.low, expected.high), abs=1e-12)
    assert np.isnan(share_range(np.array([0]), np.array([0]))).all()  # no documents: no range
    assert [q_text(q) for q in (0.0, 3e-5, 0.0312, 1.0)] == ["below 0.0001", "below 0.0001", "0.031", "1"]
    words = range_text([0.0, 0.004, 0.5, np.nan], [0.2, 0.021, 0.62, np.nan])
    assert words == ["0% to 20%", "0.4% to 2.1%", "50% to 62%", ""]


def test_p_values_are_scipys_fisher_test_two_sided_by_doubling_the_smaller_tail():
    rng = np.random.default_rng(0)
    n_documents = 300
    for _ in range(200):
        group_size, with_concept = rng.integers(1, n_documents, 2)
        low = max(0, group_size + with_concept - n_documents)
        in_group = rng.integers(low, min(group_size, with_concept) + 1)
        (p,) = fisher_p_values(np.array([in_group]), np.array([group_size]), np.array([with_concept]), n_documents)
        rest = [with_concept - in_group, n_documents - group_size - with_concept + in_group]
        table = [[in_group, group_size - in_group], rest]
        less, greater = (stats.fisher_exact(table, alternative=side).pvalue for side in ("less", "greater"))
        assert p == pytest.approx(min(1.0, 2 * min(less, greater)), rel=1e-9, abs=1e-300)


def test_large_tables_get_scipys_chi_squared_test_with_yates_correction_and_small_ones_the_exact_test():
    rng = np.random.default_rng(1)
    n_documents = 100_000
    for _ in range(100):
        group_size, with_concept = rng.integers(1, n_documents // 2, 2)
        in_group = rng.hypergeometric(with_concept, n_documents - with_concept, group_size)
        rest = [with_concept - in_group, n_documents - group_size - with_concept + in_group]
        table = [[in_group, group_size - in_group], rest]
        args = (np.array([in_group]), np.array([group_size]), np.array([with_concept]), n_documents)
        (p,) = p_values(*args)
        if min(group_size, with_concept) * min(n_documents - group_size, n_documents - with_concept) < 5 * n_documents:
            assert p == fisher_p_values(*args)[0]
        else:
            assert p == pytest.approx(stats.chi2_contingency(table).pvalue, rel=1e-9, abs=1e-300)
            assert p == pytest.approx(fisher_p_values(*args)[0], rel=0.25, abs=1e-3)  # the two agree there


def test_q_values_are_benjamini_hochberg_over_every_pair_tested(small_run):
    run = load_run(Workspace(small_run.path))
    groups = Workspace(small_run.path).metadata(small_run.dataset_id)["label"]
    frame = group_comparison(run.codes, groups)
    assert frame["q_value"].to_numpy() == pytest.approx(stats.false_discovery_control(frame["p_value"]))
    assert (frame["q_value"] >= frame["p_value"]).all()
    present = np.flatnonzero(np.diff(run.codes.tocsc().indptr))
    assert len(frame) == 5 * len(present)  # 5 desks x every feature active somewhere


def test_ranked_puts_the_differences_that_hold_first_and_the_summary_counts_them():
    frame = pd.DataFrame(
        {
            "group": ["a", "a", "a", "b", "(other)", "c"],
            "feature_id": [0, 1, 2, 0, 0, 0],
            "group_size": [40, 40, 40, 30, 25, MIN_GROUP_SIZE - 1],
            "difference": [0.5, 0.3, -0.2, -0.5, 0.4, 0.6],
            "q_value": [0.2, 0.01, 0.04, 0.01, 0.001, 0.001],
        }
    )
    order = ranked(frame, 0.05)
    assert order["group"].tolist() == ["a", "a", "a", "b", "c", "(other)"]  # the pooled group last
    assert order["feature_id"].tolist() == [1, 2, 0, 0, 0, 0]
    assert order["holds"].tolist() == [True, True, False, True, False, True]  # "c" is too small to hold
    assert verdicts(order)[4] == "too few documents to tell" and verdicts(order)[2] == "could be chance"
    summary = summarise(frame, 0.05)
    assert (summary.n_groups, summary.n_concepts, summary.n_tested, summary.n_hold) == (4, 3, 6, 4)
    assert summary.sentence("theme") == (
        f"Tested 3 themes in each of 4 groups (6 comparisons): 4 differences hold (q below 0.05, in groups of at "
        f"least {MIN_GROUP_SIZE} documents); the other 2 could be chance. 1 group has fewer than {MIN_GROUP_SIZE} "
        "documents: too few to tell, no difference there holds."
    )


def test_a_tiny_group_sharing_a_rare_concept_is_compared_but_its_difference_does_not_hold():
    """Three documents, two of them with a concept no other document has: Fisher's test finds it unlikely by chance,
    but three documents are too few to tell; a group of MIN_GROUP_SIZE with the same pattern holds."""
    n_documents = 200
    for size, holds in ((3, False), (MIN_GROUP_SIZE, True)):
        groups = pd.Series(["rest"] * n_documents)
        groups[:size] = "tiny"
        present = np.zeros((n_documents, 1), np.float32)
        present[: max(2, size - 1)] = 1.0
        result = ranked(group_comparison(sp.csr_matrix(present), groups))
        row = result[result["group"] == "tiny"].iloc[0]
        assert row["q_value"] < 0.05 and bool(row["holds"]) is holds


RANDOM_DRAWS = 20
BBC_DRAWS = 100


def random_groups(n_documents: int, seed: int) -> pd.Series:
    return pd.Series(np.random.default_rng(seed).choice(["a", "b", "c", "d", "e"], n_documents))


def null_findings(levels: list[sp.csc_matrix], n_documents: int, draws: int) -> tuple[int, int, int, int]:
    """Draws of 5 random groups compared at every level: (comparisons held, rejected at p < 0.05, tested, (draw,
    level) pairs with at least one comparison held)."""
    held = rejected = tested = with_findings = 0
    for seed in range(draws):
        groups = random_groups(n_documents, seed)
        for units in levels:
            frame = group_comparison(units, groups)
            found = int(holding(frame, MAX_Q).sum())
            held, with_findings = held + found, with_findings + (found > 0)
            rejected, tested = rejected + int((frame["p_value"] < 0.05).sum()), tested + len(frame)
    return held, rejected, tested, with_findings


def most_draws_with_findings(trials: int) -> int:
    """With nothing to find, BH at q < 0.05 finds something in a draw with probability at most 0.05: the count of
    draws with findings stays within the 99.9% quantile of Binomial(trials, 0.05)."""
    return int(stats.binom.ppf(0.999, trials, 0.05))


def test_groups_drawn_at_random_find_at_most_the_expected_share_of_differences(small_run):
    """60 real BBC articles, 5 groups drawn at random 20 times over the features, families and themes: with nothing
    to find, BH at q < 0.05 finds something in at most 5% of draws, and the uncorrected tests reject at most 5% of
    the time (the discrete exact test rejects less)."""
    run = load_run(Workspace(small_run.path))
    levels = [level_units(run, level)[0] for level in ("feature", "family", "theme")]
    held, rejected, tested, with_findings = null_findings(levels, run.codes.shape[0], RANDOM_DRAWS)
    assert tested >= RANDOM_DRAWS * 5 * 40  # 5 groups, at least 40 concepts a draw (a machine gave exactly 50)
    assert rejected / tested <= 0.05
    assert with_findings <= most_draws_with_findings(RANDOM_DRAWS * 3) and held / tested <= 0.05 * 0.05


def test_real_desks_find_their_theme_and_random_groups_are_not_predicted(small_run):
    run = load_run(Workspace(small_run.path))
    desks = Workspace(small_run.path).metadata(small_run.dataset_id)["label"]
    themes, _ = level_units(run, "theme")
    frame = ranked(group_comparison(themes, desks))
    best = frame.groupby("group").head(1)
    assert best["holds"].sum() >= 3  # 12 articles a desk: most desks' own theme holds already
    predicted = group_predictors(run.codes, desks)
    assert predicted.accuracy >= 0.7 and predicted.baseline == pytest.approx(0.2)
    chance = group_predictors(run.codes, random_groups(len(desks), 0))
    assert chance.accuracy <= 0.4


def test_predictors_are_scored_on_held_out_documents_so_memorised_concepts_earn_nothing():
    """Concept 0 marks group a on every document; concepts 1..100 each mark one document of group b only (perfect
    in the training documents, never seen again): concept 0 ranks first for a, the marks earn nothing."""
    n = 200
    groups = pd.Series(["a"] * (n // 2) + ["b"] * (n // 2))
    rng = np.random.default_rng(0)
    signal = (groups == "a").to_numpy().astype(float)
    unique_marks = sp.csr_matrix((np.ones(n // 2), (np.arange(n // 2, n), np.arange(n // 2))), shape=(n, n // 2))
    noise = sp.random(n, 20, density=0.2, random_state=rng, data_rvs=np.ones)
    units = sp.hstack([sp.csr_matrix(signal[:, None]), unique_marks, noise], format="csr")
    predicted = group_predictors(units, groups)
    assert predicted.frame[predicted.frame["group"] == "a"]["feature_id"].iloc[0] == 0
    assert predicted.frame.set_index(["group", "feature_id"]).loc[("a", 0), "gain"] > 0.2
    memorised = predicted.frame[predicted.frame["feature_id"].between(1, n // 2)]
    assert memorised.empty  # no held-out document holds a mark of another document
    assert predicted.accuracy >= 0.95 and predicted.baseline == 0.5


def test_groups_too_small_to_predict_are_left_out_and_named():
    units = sp.csr_matrix(np.eye(12)[np.arange(12) % 3])
    groups = pd.Series(["x"] * 5 + ["y"] * 5 + ["z"] * 2)
    predicted = group_predictors(units, groups)
    assert predicted.left_out == ("z",) and predicted.n_documents == 10
    assert "Groups too small to predict: z." in predicted.sentence()
    assert group_predictors(units, pd.Series(["x"] * 10 + ["y"] * 2)) is None


@pytest.fixture(scope="module")
def bbc_run(bbc_workspace, tmp_path_factory):
    """The whole BBC corpus (2,225 articles, five desks) trained with the suggested settings, in a copy of the
    session's embedded workspace (other tests read its runs)."""
    workspace, dataset_id = bbc_workspace
    copy = Workspace(shutil.copytree(workspace.path, tmp_path_factory.mktemp("bbc_compare") / "workspace"))
    pipeline.train_run(copy, dataset_id)
    return load_run(copy, dataset_id=dataset_id), copy.metadata(dataset_id)["label"]


def test_bbc_groups_drawn_at_random_find_at_most_the_expected_share(bbc_run):
    """Whole BBC, 5 random groups, 100 draws, at the feature, family and theme levels (about 42,000 comparisons: the
    suggested run keeps about 60 features)."""
    run, desks = bbc_run
    levels = [level_units(run, level)[0] for level in ("feature", "family", "theme")]
    held, rejected, tested, with_findings = null_findings(levels, len(desks), BBC_DRAWS)
    assert tested > BBC_DRAWS * 5 * 80
    assert rejected / tested <= 0.05
    assert with_findings <= most_draws_with_findings(BBC_DRAWS * 3) and held / tested <= 0.05 * 0.05
    chance = group_predictors(levels[2], random_groups(len(desks), 0))
    assert chance.accuracy <= chance.baseline + 0.05


def test_bbc_desks_each_hold_their_own_theme_with_a_large_effect(bbc_run):
    run, desks = bbc_run
    themes, _ = level_units(run, "theme")
    frame = ranked(group_comparison(themes, desks))
    best = frame.groupby("group").head(1).set_index("group")
    assert best["feature_id"].nunique() == 5  # one theme a desk, a different one for each
    assert best["holds"].all() and (best["q_value"] < 1e-50).all()
    assert (best["prevalence"] >= 0.9).all() and (best["prevalence_rest"] <= 0.05).all()
    assert (best["difference"] >= 0.85).all() and (best["lift"] >= 15).all()
    predicted = group_predictors(themes, desks)
    assert predicted.accuracy >= 0.9 and predicted.baseline < 0.25
    top = predicted.frame.groupby("group").head(1).set_index("group")["feature_id"]
    assert top.to_dict() == best["feature_id"].to_dict()  # the theme that holds is the one that predicts the desk


MTS_SPECIALTIES = 6
MTS_NOTES = 50


@pytest.mark.slow
def test_mtsamples_specialties_each_hold_a_concept_with_a_large_effect(corpora_dir, tmp_path):
    """50 clinical notes from each of the 6 largest MTSamples specialties, embedded and trained with the suggested
    settings: every specialty has a concept of its own (a different feature for each) that holds far beyond chance,
    and for all but one it is several times more common in the specialty than elsewhere. (The themes of MTSamples
    are note types, which cut across specialties: the feature level is where the specialties are.)"""
    notes = pd.read_parquet(corpora_dir / "mtsamples.parquet", columns=["id", "text", "label"])
    largest = notes["label"].value_counts().index[:MTS_SPECIALTIES]
    sample = pd.concat(notes[notes["label"] == name].head(MTS_NOTES) for name in largest)
    sample.to_parquet(tmp_path / "notes.parquet")
    workspace = Workspace(tmp_path / "workspace")
    dataset_id, _ = pipeline.ingest(
        workspace, [tmp_path / "notes.parquet"], "notes", IngestConfig(text_column="text", id_column="id")
    )
    pipeline.embed_dataset(workspace, dataset_id)
    pipeline.train_run(workspace, dataset_id)
    run = load_run(workspace, dataset_id=dataset_id)
    features, _ = level_units(run, "feature")
    frame = ranked(group_comparison(features, workspace.metadata(dataset_id)["label"]))
    best = frame[frame["holds"]].groupby("group").head(1).set_index("group")
    assert sorted(best.index) == sorted(largest) and best["feature_id"].nunique() == MTS_SPECIALTIES
    assert (best["q_value"] < 1e-5).all() and (best["lift"] >= 1.5).all()
    assert (best["lift"] >= 3).sum() >= MTS_SPECIALTIES - 1  # 16 features for 300 notes: one may be broader
