"""Compare groups: which metadata columns make groups, how values and dates become groups, pooling."""

import pandas as pd

from prisma_core.compare.groups import (
    MAX_GROUPS,
    MISSING,
    OTHER,
    column_note,
    feature_order,
    group_sizes,
    group_values,
    ordered_columns,
    pooled,
    too_many_values,
)


def test_columns_with_nearly_one_value_per_document_are_flagged_and_offered_last():
    n = 400
    frame = pd.DataFrame(
        {
            "doi": [f"10.1000/{i}" for i in range(n)],
            "field": [f"field {i % 24}" for i in range(n)],
            "year": pd.to_datetime([f"{2000 + i % 20}-01-01" for i in range(n)]),
        }
    )
    assert too_many_values(frame["doi"]) and not too_many_values(frame["field"])
    assert column_note(frame["doi"]) == "400 different values" and column_note(frame["field"]) == "24 groups"
    assert ordered_columns(frame) == ["field", "year", "doi"]
    assert pooled(frame["field"]).nunique() == 24  # 24 groups are all compared
    assert pooled(frame["doi"]).nunique() == MAX_GROUPS
    assert feature_order(pd.Series([102, 9, 23]), pd.Series(["#102 b", "#9 a", "#23 c"])) == ["#9 a", "#23 c", "#102 b"]


def test_dates_group_by_year_quarter_or_month_and_missing_values_get_their_own_group():
    dates = pd.Series(pd.to_datetime(["2023-02-10", "2023-11-30", "2024-03-01", None]))
    assert group_values(dates).tolist() == ["2023", "2023", "2024", MISSING]
    assert group_values(dates, "quarter").tolist() == ["2023Q1", "2023Q4", "2024Q1", MISSING]
    assert group_values(dates, "month").tolist() == ["2023-02", "2023-11", "2024-03", MISSING]
    assert group_values(pd.Series(["sport", None, 3])).tolist() == ["sport", MISSING, "3"]


def test_the_pooled_and_missing_groups_are_listed_last_however_large():
    """Issue 45: the pooled "(other)" group, often the largest, was listed first in comparisons."""
    values = [f"value {i}" for i in range(40) for _ in range(i + 1)] + [None] * 500
    groups = pooled(group_values(pd.Series(values, dtype="string")))
    sizes = group_sizes(groups)
    assert list(sizes.index[-2:]) == [MISSING, OTHER] and sizes[OTHER] > sizes.iloc[0] and sizes[MISSING] == 500
    assert (sizes.iloc[:-2].diff().dropna() <= 0).all()  # the others largest first
