"""The settings of concepts over time: the command line's `trends` flags and the export read them from here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from prisma_core.compare import MAX_Q
from prisma_core.config_docs import CheckedConfig, setting


@dataclass(frozen=True)
class TrendConfig(CheckedConfig):
    settings_name = "trends"

    column: str | None = setting(
        None,
        doc="Metadata column of dates (default: the first column of dates; dates are recognised when a "
        "dataset is created).",
    )
    period: Literal["auto", "day", "week", "month", "quarter", "year"] = setting(
        "auto",
        doc="How dates are grouped; auto: the finest period that splits the span into at most 36 periods with "
        "10 documents or more each on average.",
    )
    level: Literal["every", "theme", "subtheme", "family", "feature"] = setting(
        "every",
        doc="Concepts followed over time: themes, sub-themes, families, features, or every level (q counts "
        "the tests of one level).",
    )
    max_q: float = setting(
        MAX_Q,
        above=0,
        maximum=1,
        doc="A change holds when its Benjamini-Hochberg q (over both tests of every concept of its level) is "
        "below this.",
    )
    compare_from: str | None = setting(
        None,
        doc="The earlier of the two periods the change test compares, as a date or a period (2007-04, "
        "2007Q2); default: the first period with 10 documents or more.",
    )
    compare_to: str | None = setting(
        None, doc="The later of the two periods compared; default: the last period with 10 documents or more."
    )
