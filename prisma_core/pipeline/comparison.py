"""The door to comparing groups of documents (the Explore page's Compare view): the groups a column makes, how much
more often each group holds a concept than the others, and which concepts predict a group."""

from prisma_core.compare import MAX_Q
from prisma_core.compare.groups import (
    DATE_BUCKETS,
    LEFTOVER_GROUPS,
    MAX_GROUPS,
    column_note,
    feature_order,
    group_sizes,
    group_values,
    ordered_columns,
    pooled,
    too_many_values,
)
from prisma_core.compare.prediction import Predictors, group_predictors
from prisma_core.compare.prevalence import group_comparison, q_text, range_text, ranked, summarise, verdicts

__all__ = [
    "DATE_BUCKETS",
    "LEFTOVER_GROUPS",
    "MAX_GROUPS",
    "MAX_Q",
    "Predictors",
    "column_note",
    "feature_order",
    "group_comparison",
    "group_predictors",
    "group_sizes",
    "group_values",
    "ordered_columns",
    "pooled",
    "q_text",
    "range_text",
    "ranked",
    "summarise",
    "too_many_values",
    "verdicts",
]
