"""How common each concept is in each period, and which concepts rise or fall beyond chance.

For every concept (a column of a documents x concepts matrix: themes, sub-themes, families or features) and every
period of a date column (documents without a date left out):
- the share of the period's documents holding the concept, with its 95% range (the Wilson interval of
  `compare.prevalence.share_range`);
- a test for a trend over every period: the Cochran-Armitage test, the score test of a logistic regression of
  presence on time (each document scored by its period's position, so a gap of empty periods counts as time). Its
  statistic is the sum over documents holding the concept of their period's distance from the mean period; its
  variance is the one it has when the dates are shuffled among the documents (the hypergeometric variance, so that
  z squared is (N - 1) times the squared correlation of presence and time). The change shown is the slope of the
  straight line through the shares (least squares, each period weighted by its documents) times the span;
- a test between two chosen periods: the 2 x 2 table (which of the two periods, concept present or not) tested as
  the group comparison tests it (`compare.prevalence.p_values`: Fisher's exact test, or chi-squared where every
  expected count is large);
- q: Benjamini-Hochberg over every test made (both tests of every concept tested), so with dates that mean nothing
  at most about 1 analysis in 20 finds a change at q below 0.05.
Concepts held by, or missing from, fewer than MIN_CONCEPT_DOCUMENTS dated documents are not tested.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy import stats

from prisma_core.compare import MAX_Q
from prisma_core.compare.prevalence import group_counts, p_values, share_range
from prisma_core.trends import (
    FALLING,
    FELL,
    MIN_CONCEPT_DOCUMENTS,
    MIN_PERIOD_DOCUMENTS,
    NO_CHANGE,
    RISING,
    ROSE,
    TOO_FEW,
)
from prisma_core.trends.periods import Timeline


@dataclass(frozen=True)
class Trends:
    """A concept matrix's shares per period and its tests (see the module's docstring)."""

    timeline: Timeline
    compared: tuple[int, int] | None  # the positions of the two periods the change test compares (None: fewer than 2)
    shares: pd.DataFrame  # feature_id, period (position), n_period, n_documents, share, share_low, share_high, too_few
    tests: pd.DataFrame  # feature_id, n_documents, tested, trend_change, trend_z, trend_p, trend_q, from_share,
    # to_share, change, change_p, change_q


def period_counts(units: sp.spmatrix, timeline: Timeline) -> np.ndarray:
    """[n_periods, n_concepts]: the dated documents of each period holding each concept (present where > 0)."""
    dated = np.flatnonzero(timeline.index >= 0)
    names, counts, _ = group_counts(sp.csr_matrix(units)[dated], pd.Series(timeline.index[dated]))
    every = np.zeros((len(timeline.periods), units.shape[1]), dtype=np.int64)
    every[names.astype(int)] = counts
    return every


def default_compared(sizes: np.ndarray) -> tuple[int, int] | None:
    """The first and the last period with MIN_PERIOD_DOCUMENTS documents or more (else with any); None when fewer
    than two periods have documents."""
    for enough in (sizes >= MIN_PERIOD_DOCUMENTS, sizes > 0):
        found = np.flatnonzero(enough)
        if len(found) >= 2:
            return int(found[0]), int(found[-1])
    return None


def over_time(units: sp.spmatrix, timeline: Timeline, compared: tuple[int, int] | None = None) -> Trends:
    """Every concept's share per period and its trend and change tests. compared: the positions of the two periods
    the change test compares (default: `default_compared`)."""
    counts, sizes = period_counts(units, timeline), timeline.sizes
    compared = default_compared(sizes) if compared is None else compared
    totals = counts.sum(axis=0)
    n_dated = int(sizes.sum())
    occupied = np.flatnonzero(sizes)
    enough = (totals >= MIN_CONCEPT_DOCUMENTS) & (n_dated - totals >= MIN_CONCEPT_DOCUMENTS)
    tested = enough & (len(occupied) >= 2)  # one period: no time to change over
    z, slope = trend_statistics(counts, sizes, np.arange(len(sizes), dtype=np.float64))
    tests = pd.DataFrame({"feature_id": np.arange(units.shape[1], dtype=np.int32), "n_documents": totals})
    tests["tested"] = tested
    tests["trend_change"] = slope * float(occupied[-1] - occupied[0])
    tests["trend_z"] = z
    tests["trend_p"] = np.where(tested, 2 * stats.norm.sf(np.abs(z)), np.nan)
    tests = tests.join(change_tests(counts, sizes, compared, tested))
    p = np.concatenate([tests["trend_p"], tests["change_p"]])
    q = np.full(len(p), np.nan)
    made = ~np.isnan(p)
    q[made] = stats.false_discovery_control(p[made]) if made.any() else []
    tests["trend_q"], tests["change_q"] = q[: len(tests)], q[len(tests) :]
    return Trends(timeline, compared, period_shares(counts, sizes), tests)


def trend_statistics(counts: np.ndarray, sizes: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(z, slope) of the Cochran-Armitage test for each concept: counts [n_periods, n_concepts] of documents holding
    it, sizes [n_periods] documents per period, scores [n_periods] each period's time. z is NaN for a concept every
    dated document holds or none does; slope is the share's change per unit of score (least squares, weighted)."""
    n = float(sizes.sum())
    centred = scores - (sizes * scores).sum() / n
    spread = float((sizes * centred**2).sum())
    statistic = centred @ counts  # the concept's documents' distance from the mean time, summed
    held = counts.sum(axis=0).astype(np.float64)
    variance = held * (n - held) / (n * (n - 1)) * spread if n > 1 else np.zeros_like(held)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(variance > 0, statistic / np.sqrt(variance), np.nan)
        slope = statistic / spread if spread > 0 else np.zeros_like(held)
    return z, slope


def change_tests(
    counts: np.ndarray, sizes: np.ndarray, compared: tuple[int, int] | None, tested: np.ndarray
) -> pd.DataFrame:
    """from_share, to_share, change (to minus from) and change_p of each concept between the two compared periods;
    p is NaN for the concepts not tested and when there is no pair of periods."""
    n_concepts = counts.shape[1]
    if compared is None:
        empty = np.full(n_concepts, np.nan)
        return pd.DataFrame({"from_share": empty, "to_share": empty, "change": empty, "change_p": empty})
    first, last = compared
    before, after = counts[first], counts[last]
    n_before, n_after = int(sizes[first]), int(sizes[last])
    frame = pd.DataFrame({"from_share": before / max(n_before, 1), "to_share": after / max(n_after, 1)})
    frame["change"] = frame["to_share"] - frame["from_share"]
    possible = tested & (n_before > 0) & (n_after > 0)
    p = np.full(n_concepts, np.nan)
    if possible.any():
        sizes_after = np.full(int(possible.sum()), n_after)
        p[possible] = p_values(after[possible], sizes_after, (before + after)[possible], n_before + n_after)
    frame["change_p"] = p
    return frame


def period_shares(counts: np.ndarray, sizes: np.ndarray) -> pd.DataFrame:
    """One row per (concept, period): feature_id, period (position), n_period, n_documents, share (NaN in an empty
    period) with share_low and share_high, too_few (fewer than MIN_PERIOD_DOCUMENTS documents in the period)."""
    n_periods, n_concepts = counts.shape
    period, concept = (a.ravel() for a in np.meshgrid(np.arange(n_periods), np.arange(n_concepts), indexing="ij"))
    n_period = sizes[period]
    n_documents = counts[period, concept]
    frame = pd.DataFrame({"feature_id": concept.astype(np.int32), "period": period, "n_period": n_period})
    frame["n_documents"] = n_documents
    with np.errstate(divide="ignore", invalid="ignore"):
        frame["share"] = np.where(n_period > 0, n_documents / n_period, np.nan)
    frame["share_low"], frame["share_high"] = share_range(n_documents, n_period)
    frame["too_few"] = n_period < MIN_PERIOD_DOCUMENTS
    return frame.sort_values(["feature_id", "period"], kind="stable").reset_index(drop=True)


def judged(tests: pd.DataFrame, max_q: float = MAX_Q) -> pd.DataFrame:
    """The tests with their verdicts in words: `verdict` (the trend: rising, falling, no change that holds, too few
    documents to tell), `change_verdict` (between the compared periods: rose, fell, ...) and `changes` (either
    holds)."""
    trend = tests["trend_q"] < max_q
    change = tests["change_q"] < max_q
    verdict = np.where(trend, np.where(tests["trend_z"] > 0, RISING, FALLING), NO_CHANGE)
    change_verdict = np.where(change, np.where(tests["change"] > 0, ROSE, FELL), NO_CHANGE)
    return tests.assign(
        verdict=np.where(tests["tested"], verdict, TOO_FEW),
        change_verdict=np.where(tests["change_p"].notna(), change_verdict, TOO_FEW),
        changes=trend | change,
    )


def ranked(tests: pd.DataFrame, max_q: float = MAX_Q) -> pd.DataFrame:
    """The judged tests in reading order: the concepts that change first (largest change over the span first),
    then those with no change that holds, then those too rare to test."""
    marked = judged(tests, max_q)
    order = marked.assign(_size=marked["trend_change"].abs())
    order = order.sort_values(["changes", "tested", "_size"], ascending=False, kind="stable")
    return order.drop(columns="_size").reset_index(drop=True)


@dataclass(frozen=True)
class TrendSummary:
    """What was tested and what holds, for the sentence the app and the report show."""

    n_concepts: int
    n_tested: int
    rising: int
    falling: int
    changed: int  # whose change between the compared periods holds (whatever their trend)
    n_periods: int
    period: str
    too_few_periods: int
    max_q: float

    def sentence(self, noun: str = "concept", plural: str = "concepts") -> str:
        """E.g. "Tested 12 of 14 themes over 24 months: 2 rising, 1 falling (q below 0.05), 9 with no trend that
        holds; 3 changed between the two periods compared."."""
        plural = noun if self.n_concepts == 1 else plural
        periods = self.period if self.n_periods == 1 else f"{self.period}s"
        steady = self.n_tested - self.rising - self.falling
        return (
            f"Tested {self.n_tested:,} of {self.n_concepts:,} {plural} over {self.n_periods:,} {periods}: "
            f"{self.rising:,} rising, {self.falling:,} falling (q below {self.max_q:g}), {steady:,} with no trend "
            f"that holds; {self.changed:,} changed between the two periods compared."
        )

    def too_few_sentence(self) -> str:
        """E.g. "3 of 24 months have fewer than 10 documents: their shares say little on their own." ("" if none)."""
        if not self.too_few_periods:
            return ""
        periods = self.period if self.n_periods == 1 else f"{self.period}s"
        verb = "has" if self.too_few_periods == 1 else "have"
        return (
            f"{self.too_few_periods:,} of {self.n_periods:,} {periods} {verb} fewer than {MIN_PERIOD_DOCUMENTS} "
            "documents: their shares say little on their own."
        )


def summarise(trends: Trends, max_q: float = MAX_Q) -> TrendSummary:
    marked = judged(trends.tests, max_q)
    return TrendSummary(
        n_concepts=len(marked),
        n_tested=int(marked["tested"].sum()),
        rising=int((marked["verdict"] == RISING).sum()),
        falling=int((marked["verdict"] == FALLING).sum()),
        changed=int(marked["change_verdict"].isin([ROSE, FELL]).sum()),
        n_periods=len(trends.timeline.periods),
        period=trends.timeline.period,
        too_few_periods=int((trends.timeline.sizes < MIN_PERIOD_DOCUMENTS).sum()),
        max_q=max_q,
    )
