"""How common each concept is in each group, with the statistics that say which differences hold.

For every group of a metadata column and every concept (a column of a documents x concepts matrix: themes, families
or features) present in at least one document, the 2 x 2 table (in the group or not, concept present or not) gives:
- the share of the group's documents with the concept and the share of the other documents, each with its 95% range
  (Wilson score interval, the one `scipy.stats.binomtest(...).proportion_ci(method="wilson")` gives);
- the effect: the difference of the two shares and their ratio (lift);
- p: Fisher's exact test of the table, two-sided by doubling its smaller tail (the "central" Fisher test), from the
  hypergeometric distribution of `scipy.stats.hypergeom`; where every expected count of the table is at least
  EXACT_BELOW (Cochran's rule), Pearson's chi-squared test with Yates' correction instead (what
  `scipy.stats.chi2_contingency` gives a 2 x 2 table), which agrees with it there and costs the same however many
  documents there are (the exact test sums over every possible count: seconds for thousands of large tables);
- q: Benjamini-Hochberg adjusted p over every (group, concept) pair tested (`scipy.stats.false_discovery_control`).
  Among the differences with q below a threshold, at most that share is expected to be chance findings.

The ranges and tests are computed for all pairs at once (one scipy call each, over arrays); tests/core/
test_compare.py checks them against scipy's one-table functions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy import stats

from prisma_core.compare import CONFIDENCE, MAX_Q, MIN_GROUP_SIZE
from prisma_core.compare.groups import LEFTOVER_GROUPS, MISSING


def group_comparison(units: sp.spmatrix, groups: pd.Series) -> pd.DataFrame:
    """Every (group, concept) pair of the concepts present in at least one document, with its statistics.

    units: [n_documents, n_concepts], a concept present where > 0; groups: each document's group (missing values
    are a group of their own). One row per pair: group, feature_id (the concept's column), group_size, n_documents
    (the group's documents with it), prevalence with prevalence_low and prevalence_high (its 95% range), rest_size,
    n_rest, prevalence_rest with rest_low and rest_high, difference (prevalence - prevalence_rest), lift (their
    ratio, the rest's share floored at one document), p_value and q_value; sorted by group, then difference.
    """
    names, counts, sizes = group_counts(units, groups)
    totals = counts.sum(axis=0)
    present = np.flatnonzero(totals > 0)
    group_idx, concept_idx = (a.ravel() for a in np.meshgrid(np.arange(len(names)), present, indexing="ij"))
    n_documents = sizes.sum()
    group_size = sizes[group_idx]
    rest_size = n_documents - group_size
    in_group = counts[group_idx, concept_idx]
    in_rest = totals[concept_idx] - in_group
    frame = pd.DataFrame({"group": names[group_idx], "feature_id": concept_idx.astype(np.int32)})
    frame["group_size"] = group_size
    frame["n_documents"] = in_group
    frame["prevalence"] = in_group / group_size
    frame["prevalence_low"], frame["prevalence_high"] = share_range(in_group, group_size)
    frame["rest_size"] = rest_size
    frame["n_rest"] = in_rest
    frame["prevalence_rest"] = np.divide(in_rest, rest_size, out=np.zeros(len(frame)), where=rest_size > 0)
    frame["rest_low"], frame["rest_high"] = share_range(in_rest, rest_size)
    frame["difference"] = frame["prevalence"] - frame["prevalence_rest"]
    floor = 1.0 / max(int(rest_size.max(initial=0)), 1)
    frame["lift"] = frame["prevalence"] / np.maximum(frame["prevalence_rest"], floor)
    frame["p_value"] = p_values(in_group, group_size, totals[concept_idx], n_documents)
    frame["q_value"] = stats.false_discovery_control(frame["p_value"]) if len(frame) else frame["p_value"]
    return frame.sort_values(["group", "difference"], ascending=[True, False], kind="stable").reset_index(drop=True)


def group_counts(units: sp.spmatrix, groups: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(group names sorted, [n_groups, n_concepts] documents of each group with each concept, group sizes)."""
    labels = groups.astype("string").fillna(MISSING).to_numpy()
    names, group_of_doc = np.unique(labels, return_inverse=True)
    membership = sp.csr_matrix(
        (np.ones(len(labels), dtype=np.float32), (group_of_doc, np.arange(len(labels)))),
        shape=(len(names), len(labels)),
    )
    present = (sp.csr_matrix(units) > 0).astype(np.float32)
    counts = np.rint((membership @ present).toarray()).astype(np.int64)
    sizes = np.bincount(group_of_doc, minlength=len(names)).astype(np.int64)
    return names.astype(object), counts, sizes


def share_range(count: np.ndarray, total: np.ndarray, confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of count / total, element-wise; NaN where total is 0."""
    count, total = np.asarray(count, dtype=np.float64), np.asarray(total, dtype=np.float64)
    z = stats.norm.ppf(0.5 + confidence / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = count / total
        centre = (share + z**2 / (2 * total)) / (1 + z**2 / total)
        half = z / (1 + z**2 / total) * np.sqrt(share * (1 - share) / total + z**2 / (4 * total**2))
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


EXACT_BELOW = 5.0
"""Tables with an expected count below this get Fisher's exact test, the others the chi-squared test."""


def p_values(in_group: np.ndarray, group_size: np.ndarray, with_concept: np.ndarray, n_documents: int) -> np.ndarray:
    """Two-sided p of each table: Fisher's exact test where an expected count is below EXACT_BELOW, else the
    chi-squared test with Yates' correction."""
    in_group, group_size, with_concept = (np.asarray(a, dtype=np.int64) for a in (in_group, group_size, with_concept))
    smallest_expected = np.minimum(group_size, n_documents - group_size) * np.minimum(
        with_concept, n_documents - with_concept
    )
    exact = smallest_expected < EXACT_BELOW * n_documents
    p = np.empty(len(in_group))
    p[exact] = fisher_p_values(in_group[exact], group_size[exact], with_concept[exact], n_documents)
    p[~exact] = yates_p_values(in_group[~exact], group_size[~exact], with_concept[~exact], n_documents)
    return p


def yates_p_values(
    in_group: np.ndarray, group_size: np.ndarray, with_concept: np.ndarray, n_documents: int
) -> np.ndarray:
    """p of Pearson's chi-squared test with Yates' continuity correction, for tables without an empty margin."""
    a, rows, columns = (np.asarray(v, dtype=np.float64) for v in (in_group, group_size, with_concept))
    n = float(n_documents)
    away = np.abs(a * n - rows * columns)  # |ad - bc| of the table
    statistic = n * np.maximum(away - n / 2, 0.0) ** 2 / (rows * (n - rows) * columns * (n - columns))
    return stats.chi2.sf(statistic, df=1)


def fisher_p_values(
    in_group: np.ndarray, group_size: np.ndarray, with_concept: np.ndarray, n_documents: int
) -> np.ndarray:
    """Two-sided p of Fisher's exact test for each table (twice its smaller hypergeometric tail, at most 1): how
    likely `in_group` or a count further from the expected one is when the group's documents are drawn at random.

    Tables sharing their counts (rare concepts in groups of equal size) are computed once."""
    tables = np.stack([in_group, group_size, with_concept]).T.astype(np.int64)
    unique, inverse = np.unique(tables, axis=0, return_inverse=True)
    x, n, k = unique.T
    lower = stats.hypergeom.cdf(x, n_documents, k, n)
    upper = stats.hypergeom.sf(x - 1, n_documents, k, n)
    return np.minimum(1.0, 2.0 * np.minimum(lower, upper))[inverse.ravel()]


def percent(share: float) -> str:
    """A share as a percentage, with a decimal below 10%: "12%", "0.4%"."""
    return f"{share:.1%}" if 0 < share < 0.1 else f"{share:.0%}"


def range_text(low: Iterable[float], high: Iterable[float]) -> list[str]:
    """Ranges in words: "8% to 17%" ("" where there is none: no documents)."""
    return [f"{percent(lo)} to {percent(hi)}" if lo == lo else "" for lo, hi in zip(low, high, strict=True)]


def q_text(q: float) -> str:
    """A q in words: "0.032", "below 0.0001" (a very small q says nothing more)."""
    return "below 0.0001" if q < 1e-4 else f"{q:.2g}"


def holding(frame: pd.DataFrame, max_q: float = MAX_Q) -> pd.Series:
    """Whether each difference holds: its q is below max_q, in a group of at least MIN_GROUP_SIZE documents."""
    return (frame["q_value"] < max_q) & (frame["group_size"] >= MIN_GROUP_SIZE)


def verdicts(frame: pd.DataFrame) -> list[str]:
    """Each difference's verdict in words (`frame` as `ranked` gives it)."""
    small = frame["group_size"] < MIN_GROUP_SIZE
    return [
        "holds" if holds else "too few documents to tell" if tiny else "could be chance"
        for holds, tiny in zip(frame["holds"], small, strict=True)
    ]


def ranked(frame: pd.DataFrame, max_q: float = MAX_Q) -> pd.DataFrame:
    """A comparison in reading order: by group (pooled and missing values last), the differences that hold first
    (largest difference first), then those that could be chance; with a `holds` column."""
    marked = frame.assign(holds=holding(frame, max_q), pooled=frame["group"].isin(LEFTOVER_GROUPS))
    order = marked.sort_values(
        ["pooled", "group", "holds", "difference"], ascending=[True, True, False, False], kind="stable"
    )
    return order.drop(columns="pooled").reset_index(drop=True)


@dataclass(frozen=True)
class ComparisonSummary:
    """How many comparisons were made and how many hold, for the sentence the app and the report show."""

    n_groups: int
    n_concepts: int
    n_tested: int
    n_hold: int
    max_q: float
    n_small: int = 0  # groups smaller than MIN_GROUP_SIZE, whose differences never hold

    def sentence(self, noun: str = "concept") -> str:
        """E.g. "Tested 617 features in each of 5 groups (3,085 comparisons): 86 differences hold (q below
        0.05); the other 2,999 could be chance."."""
        plural = noun if self.n_concepts == 1 else f"{noun}s"
        held = "1 difference holds" if self.n_hold == 1 else f"{self.n_hold:,} differences hold"
        rest = self.n_tested - self.n_hold
        small = ""
        if self.n_small:
            groups = "1 group has" if self.n_small == 1 else f"{self.n_small:,} groups have"
            small = f" {groups} fewer than {MIN_GROUP_SIZE} documents: too few to tell, no difference there holds."
        return (
            f"Tested {self.n_concepts:,} {plural} in each of {self.n_groups:,} groups ({self.n_tested:,} "
            f"comparisons): {held} (q below {self.max_q:g}, in groups of at least {MIN_GROUP_SIZE} documents); "
            f"the other {rest:,} could be chance.{small}"
        )


def summarise(frame: pd.DataFrame, max_q: float = MAX_Q) -> ComparisonSummary:
    return ComparisonSummary(
        n_groups=int(frame["group"].nunique()),
        n_concepts=int(frame["feature_id"].nunique()),
        n_tested=len(frame),
        n_hold=int(holding(frame, max_q).sum()),
        max_q=max_q,
        n_small=int(frame.loc[frame["group_size"] < MIN_GROUP_SIZE, "group"].nunique()),
    )
