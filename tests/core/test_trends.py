"""Concepts over time: the statistics against known answers (a textbook trend test, the correlation it equals, the
variance it has when dates are shuffled, scipy's Fisher test and Wilson intervals, Benjamini-Hochberg), the periods a
date column makes, and planted changes on synthetic documents: found when they are there, and with dates that mean
nothing at most about 1 analysis in 20 reports any change."""

import itertools

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from scipy import stats

from bench.trends import dating_probabilities, plant_dates, planted_changes
from prisma_core.compare import MAX_Q
from prisma_core.errors import NotFoundError, SettingsError
from prisma_core.trends import FALLING, FELL, MIN_PERIOD_DOCUMENTS, NO_CHANGE, RISING, ROSE, TOO_FEW
from prisma_core.trends.over_time import (
    default_compared,
    judged,
    over_time,
    period_counts,
    ranked,
    summarise,
    trend_statistics,
)
from prisma_core.trends.periods import date_columns, dated_column, period_name, suggested_period, timeline


def test_the_trend_test_gives_the_textbook_answer():
    """Agresti, Categorical Data Analysis (2002), table 2.7: infant malformation by the mother's alcohol consumption,
    scores 0, 0.5, 1.5, 4, 7: M^2 = (n - 1) r^2 = 6.57, two-sided P = 0.01."""
    present = np.array([48, 38, 5, 1, 1])
    absent = np.array([17066, 14464, 788, 126, 37])
    z, _ = trend_statistics(present[:, None], present + absent, np.array([0, 0.5, 1.5, 4.0, 7.0]))
    assert z[0] ** 2 == pytest.approx(6.57, abs=0.005)
    assert 2 * stats.norm.sf(abs(z[0])) == pytest.approx(0.0104, abs=0.0001)


def test_z_squared_is_n_minus_one_times_the_squared_correlation_of_presence_and_time():
    rng = np.random.default_rng(0)
    for _ in range(20):
        sizes = rng.integers(0, 40, 8)
        counts = rng.binomial(sizes, rng.uniform(0.05, 0.6))
        z, slope = trend_statistics(counts[:, None], sizes, np.arange(8.0))
        time = np.repeat(np.arange(8.0), sizes)
        presence = np.concatenate([np.r_[np.ones(c), np.zeros(n - c)] for c, n in zip(counts, sizes, strict=True)])
        r = np.corrcoef(time, presence)[0, 1]
        assert z[0] ** 2 == pytest.approx((len(time) - 1) * r**2)
        occupied = sizes > 0
        fitted = np.polyfit(np.arange(8.0)[occupied], counts[occupied] / sizes[occupied], 1, w=np.sqrt(sizes[occupied]))
        assert slope[0] == pytest.approx(fitted[0])  # the change per period: least squares, weighted by documents


def test_the_trend_statistics_variance_is_the_one_shuffled_dates_give():
    """Every way of placing 3 concept documents among 9 dated ones: the statistic's variance over them is the one
    the test divides by."""
    periods = np.array([0, 0, 1, 1, 1, 2, 3, 3, 3])
    sizes = np.bincount(periods)
    statistics = []
    for holders in itertools.combinations(range(9), 3):
        counts = np.bincount(periods[list(holders)], minlength=4)
        statistics.append((np.arange(4) - (sizes * np.arange(4)).sum() / 9) @ counts)
    z, _ = trend_statistics(np.bincount(periods[[0, 1, 2]], minlength=4)[:, None], sizes, np.arange(4.0))
    variance = statistics[0] ** 2 / z[0] ** 2
    assert np.mean(statistics) == pytest.approx(0, abs=1e-12)
    assert np.var(statistics) == pytest.approx(variance)


def dated(months: list[int], start: str = "2020-01") -> pd.Series:
    first = pd.Period(start, "M")
    return pd.Series([(first + m).start_time + pd.Timedelta(days=3) if m >= 0 else pd.NaT for m in months])


def test_shares_per_period_with_wilson_ranges_and_empty_periods_kept():
    # 12 documents over months 0, 1 and 3 (month 2 empty), one undated; concept 0 in 1 of 4, 3 of 4, 4 of 4
    months = [0] * 4 + [1] * 4 + [3] * 4 + [-1]
    units = sp.csr_matrix(np.array([[1, 0, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1, 1]]).T.astype(float))
    line = timeline(dated(months), "month")
    assert line.names == ["2020-01", "2020-02", "2020-03", "2020-04"] and line.n_undated == 1
    assert line.sizes.tolist() == [4, 4, 0, 4]
    assert period_counts(units, line)[:, 0].tolist() == [1, 3, 0, 4]  # the undated document is left out
    shares = over_time(units, line).shares
    assert shares["share"].iloc[[0, 1, 3]].tolist() == [0.25, 0.75, 1.0] and np.isnan(shares["share"].iloc[2])
    expected = stats.binomtest(3, 4).proportion_ci(confidence_level=0.95, method="wilson")
    assert (shares["share_low"].iloc[1], shares["share_high"].iloc[1]) == pytest.approx((expected.low, expected.high))
    assert shares["too_few"].all()  # 4 documents a month: each said to have too few


def test_the_change_test_is_the_group_comparisons_test_between_the_two_periods_and_q_counts_every_test():
    """Fisher's exact test (two-sided by doubling the smaller tail) where an expected count is below 5, else the
    chi-squared test with Yates' correction, as scipy gives them; q: Benjamini-Hochberg over both tests of every
    concept."""
    rng = np.random.default_rng(3)
    months = np.repeat(np.arange(6), 30)
    units = sp.csr_matrix((rng.random((180, 12)) < np.linspace(0.06, 0.5, 12)).astype(float))
    tests = over_time(units, timeline(dated(months.tolist()), "month"), compared=(1, 4)).tests
    dense = units.toarray() > 0
    exact = 0
    for concept in range(12):
        a, b = dense[months == 1, concept].sum(), dense[months == 4, concept].sum()
        table = [[b, 30 - b], [a, 30 - a]]
        assert tests.at[concept, "change"] == pytest.approx((b - a) / 30)
        if min(a + b, 60 - a - b) * 30 < 5 * 60:
            exact += 1
            less, greater = (stats.fisher_exact(table, side).pvalue for side in ("less", "greater"))
            assert tests.at[concept, "change_p"] == pytest.approx(min(1.0, 2 * min(less, greater)))
        else:
            assert tests.at[concept, "change_p"] == pytest.approx(stats.chi2_contingency(table).pvalue)
    assert 0 < exact < 12  # both tests were checked
    p = np.concatenate([tests["trend_p"], tests["change_p"]])
    q = stats.false_discovery_control(p)
    assert tests["trend_q"].tolist() == pytest.approx(q[:12].tolist())
    assert tests["change_q"].tolist() == pytest.approx(q[12:].tolist())


def test_rare_concepts_and_a_single_period_are_too_few_to_tell():
    months = [0] * 30 + [1] * 30
    rare = np.zeros(60)
    rare[[1, 2, 40]] = 1  # 3 documents: not tested
    common = (np.arange(60) >= 30).astype(float)  # every document of the second month
    units = sp.csr_matrix(np.stack([rare, common], axis=1))
    tests = judged(over_time(units, timeline(dated(months), "month")).tests)
    assert tests["verdict"].tolist() == [TOO_FEW, RISING] and tests["change_verdict"].tolist() == [TOO_FEW, ROSE]
    assert np.isnan(tests.at[0, "trend_q"]) and tests.at[1, "trend_change"] == pytest.approx(1.0)
    one_month = judged(over_time(units, timeline(dated([0] * 60), "month")).tests)
    assert (one_month["verdict"] == TOO_FEW).all() and one_month["trend_p"].isna().all()


def test_verdicts_order_and_sentences():
    tests = pd.DataFrame(
        {
            "feature_id": [0, 1, 2, 3],
            "tested": [True, True, True, False],
            "trend_z": [3.0, -4.0, 0.5, np.nan],
            "trend_change": [0.1, -0.3, 0.02, np.nan],
            "trend_q": [0.01, 0.001, 0.6, np.nan],
            "change": [0.05, -0.2, 0.3, np.nan],
            "change_p": [0.2, 0.001, 0.01, np.nan],
            "change_q": [0.3, 0.002, 0.04, np.nan],
        }
    )
    marked = judged(tests, MAX_Q)
    assert marked["verdict"].tolist() == [RISING, FALLING, NO_CHANGE, TOO_FEW]
    assert marked["change_verdict"].tolist() == [NO_CHANGE, FELL, ROSE, TOO_FEW]
    assert marked["changes"].tolist() == [True, True, True, False]
    assert ranked(tests, MAX_Q)["feature_id"].tolist() == [1, 0, 2, 3]  # largest change over the span first
    assert judged(tests, 0.005)["verdict"].tolist() == [NO_CHANGE, FALLING, NO_CHANGE, TOO_FEW]


def test_the_summary_sentence_counts_the_verdicts_and_names_the_periods_with_too_few_documents():
    months = np.repeat(np.arange(5), [40, 40, 5, 40, 40])
    rising = (np.random.default_rng(0).random(165) < 0.1 + 0.15 * months).astype(float)
    units = sp.csr_matrix(np.stack([rising, np.tile([1.0, 0.0], 83)[:165]], axis=1))
    summary = summarise(over_time(units, timeline(dated(months.tolist()), "month")), MAX_Q)
    assert summary.sentence("theme", "themes") == (
        "Tested 2 of 2 themes over 5 months: 1 rising, 0 falling (q below 0.05), 1 with no trend that holds; "
        f"{summary.changed} changed between the two periods compared."
    )
    assert summary.too_few_sentence() == (
        f"1 of 5 months has fewer than {MIN_PERIOD_DOCUMENTS} documents: their shares say little on their own."
    )


def test_periods_suggested_from_the_span_named_and_found():
    days = pd.Series(pd.date_range("2021-03-01", periods=600, freq="h"))  # 25 days
    assert suggested_period(days) == "day"
    two_years = pd.Series(pd.date_range("2020-01-01", periods=2400, freq="7h"))  # 700 days, 100 a month
    assert suggested_period(two_years) == "month"
    assert suggested_period(two_years.head(300)) == "week"  # 88 days, 300 documents: 13 weeks of 23
    assert suggested_period(pd.Series(pd.date_range("1990-01-01", periods=400, freq="30D"))) == "year"
    assert suggested_period(two_years.head(40)) == "week"  # 12 days: 3 documents a day, 20 a week
    assert suggested_period(pd.Series(pd.date_range("1900-01-01", periods=50, freq="400D"))) == "year"  # none fits
    weeks = timeline(pd.Series(pd.to_datetime(["2024-01-03", "2024-01-17", None])), "week")
    assert weeks.names == ["week of 2024-01-01", "week of 2024-01-08", "week of 2024-01-15"]
    assert weeks.position("week of 2024-01-08") == 1 and weeks.position("2024-01-18") == 2
    quarters = timeline(pd.Series(pd.to_datetime(["2023-02-01", "2023-11-30"])), "quarter")
    assert quarters.names == ["2023Q1", "2023Q2", "2023Q3", "2023Q4"] and quarters.position("2023Q3") == 2
    assert period_name(pd.Period("2023", "Y"), "year") == "2023"
    with pytest.raises(SettingsError, match="outside the dates"):
        quarters.position("2025-01")
    with pytest.raises(SettingsError, match="not a date or a period"):
        quarters.position("soon")
    zoned = pd.Series(pd.to_datetime(["2024-01-31T23:30:00+02:00", "2024-02-01T00:30:00+02:00"]))
    assert timeline(zoned, "month").index.tolist() == [0, 1]  # each date in its own clock time
    with pytest.raises(SettingsError, match="No document has a date"):
        timeline(pd.Series([pd.NaT, pd.NaT], dtype="datetime64[us]"), "month")


def test_date_columns_and_the_column_chosen():
    metadata = pd.DataFrame(
        {
            "desk": ["a", "b"],
            "published": pd.to_datetime(["2024-01-01", "2024-02-01"]),
            "empty": pd.Series([pd.NaT, pd.NaT], dtype="datetime64[us]"),
        }
    )
    assert date_columns(metadata) == ["published"] and dated_column(metadata, None) == "published"
    with pytest.raises(NotFoundError, match="no column of dates named “desk”"):
        dated_column(metadata, "desk")
    assert dated_column(metadata[["desk"]], None) is None


def test_the_compared_periods_default_to_the_first_and_last_with_enough_documents():
    assert default_compared(np.array([3, 12, 0, 40, 10, 2])) == (1, 4)
    assert default_compared(np.array([3, 0, 2])) == (0, 2)  # none has enough: the first and last with any
    assert default_compared(np.array([0, 7, 0])) is None


PLANTED_DOCUMENTS = 3_000
NULL_DRAWS = 200


def synthetic_documents(seed: int) -> tuple[np.ndarray, sp.csr_matrix]:
    """Each of 3,000 documents in one of 5 groups; 5 concepts that are the groups, and 20 concepts each present on a
    random 15% of the documents."""
    rng = np.random.default_rng(seed)
    groups = rng.integers(0, 5, PLANTED_DOCUMENTS)
    members = np.eye(5)[groups]
    noise = (rng.random((PLANTED_DOCUMENTS, 20)) < 0.15).astype(float)
    return groups, sp.csr_matrix(np.hstack([members, noise]))


def test_planted_changes_are_found_with_their_size_and_the_rest_stay_flat():
    """Group 0 planted to triple from the first month to the last (e = 0.5), group 1 to rise by 1.67 times, group 2
    falls to make room: over 10 plantings each is found in the right direction, its measured change close to the
    planted one, and the flat concepts are (almost) never reported."""
    effects, falling = {0: 0.5, 1: 0.25}, 2
    found, flat_reports, measured = [], 0, []
    for seed in range(10):
        groups, units = synthetic_documents(seed)
        dates, probabilities = plant_dates(groups, effects, falling, seed)
        planted = planted_changes(units, probabilities)
        tests = judged(over_time(units, timeline(dates, "month")).tests)
        found.append(tests["verdict"].iloc[:3].tolist())
        flat = np.abs(planted) < 0.02  # the noise concepts share a few documents more with one group or another
        assert flat.sum() >= 20
        flat_reports += int(tests.loc[flat, "changes"].sum())
        measured.append(tests["trend_change"].iloc[:3].to_numpy() - planted[:3])
    assert all(verdicts[0] == RISING and verdicts[2] == FALLING for verdicts in found)
    assert sum(verdicts[1] == RISING for verdicts in found) >= 8
    assert flat_reports <= 3  # of about 210 flat concepts tested
    assert np.abs(np.mean(measured, axis=0)).max() < 0.02  # unbiased to within 2 points


def test_the_planted_probabilities_keep_every_month_equally_full():
    groups = np.repeat(np.arange(4), [100, 200, 300, 400])
    probabilities = dating_probabilities(groups, {0: 0.5, 1: 0.4}, 2, 24)
    assert probabilities.sum(axis=1) == pytest.approx(np.ones(1000))
    assert probabilities.sum(axis=0) == pytest.approx(np.full(24, 1000 / 24))
    with pytest.raises(ValueError, match="too small"):
        dating_probabilities(groups, {3: 1.0}, 0, 24)


def test_dates_that_mean_nothing_find_a_change_in_at_most_about_1_analysis_in_20():
    """The planted dates shuffled among the documents 200 times: the analyses reporting any change that holds stay
    within the 99.9% quantile of Binomial(200, 0.05), and the uncorrected tests reject at most about 5% of the time."""
    groups, units = synthetic_documents(0)
    dates, _ = plant_dates(groups, {0: 0.5}, 2, 0)
    rng = np.random.default_rng(1)
    with_findings = rejected = tested = 0
    for _ in range(NULL_DRAWS):
        tests = judged(over_time(units, timeline(pd.Series(rng.permutation(dates.to_numpy())), "month")).tests)
        with_findings += bool(tests["changes"].any())
        p = np.concatenate([tests["trend_p"], tests["change_p"]])
        rejected, tested = rejected + int((p < 0.05).sum()), tested + len(p)
    assert with_findings <= stats.binom.ppf(0.999, NULL_DRAWS, 0.05)
    assert rejected / tested <= 0.06
