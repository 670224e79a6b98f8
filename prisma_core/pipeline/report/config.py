"""The report's settings: the command line's `report` flags and the app's report download read them from here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from prisma_core.compare import MAX_Q
from prisma_core.config_docs import CheckedConfig, setting


@dataclass(frozen=True)
class ReportConfig(CheckedConfig):
    settings_name = "report"

    column: str | None = setting(
        None,
        doc="Metadata column whose groups the report compares (default: the first column that makes useful "
        "groups, as Explore's Compare groups offers it first; the comparison is left out of a dataset "
        "without metadata).",
    )
    level: Literal["theme", "subtheme", "family", "feature"] = setting(
        "theme", doc="Concepts the groups are compared on: themes, sub-themes, families or features."
    )
    max_q: float = setting(
        MAX_Q,
        above=0,
        maximum=1,
        doc="A difference holds when its Benjamini-Hochberg q (over every group and concept compared) is below this.",
    )
    date_bucket: Literal["year", "quarter", "month"] = setting("year", doc="How a date column is grouped.")
    per_group: int = setting(
        5, minimum=1, maximum=50, doc="Concepts shown per group in the comparison (those that hold first)."
    )
    typical_documents: int = setting(3, minimum=0, maximum=20, doc="Most typical documents shown per theme.")
    map_points: int = setting(
        2_000,
        minimum=100,
        maximum=20_000,
        doc="Documents drawn on the map at most when the report draws its own (a seeded sample of larger "
        "collections; the map takes most of the time a report of a large collection takes). The app's "
        "report draws the app's map.",
    )
    predict: bool = setting(
        True, doc="Also find the concepts that best predict the groups, scored on documents the model never saw."
    )
    date_column: str | None = setting(
        None,
        doc="Metadata column of dates the themes are followed over, with a small chart per theme that rises "
        "or falls (default: the first column of dates; left out of a dataset without one).",
    )
    period: Literal["auto", "day", "week", "month", "quarter", "year"] = setting(
        "auto",
        doc="How those dates are grouped (auto: the period their span suggests, as Explore's Over time picks it).",
    )
