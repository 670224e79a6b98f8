"""Where the report's small charts over time put things: a concept's share in each period as a line with its 95%
range as a band (broken where a period has no documents), hollow points for periods with too few documents, and the
straight line the trend test fits. Coordinates only: the over_time template draws them as inline SVG."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from prisma_core.compare.prevalence import percent
from prisma_core.pipeline.report.drawing import axis_end, axis_ticks

WIDTH, HEIGHT = 460, 170
LEFT, RIGHT, TOP, BOTTOM = 44, 12, 10, 26


@dataclass(frozen=True)
class PeriodPoint:
    x: float
    y: float
    too_few: bool
    title: str  # what hovering the point shows: "2005-03: 31% (24% to 39%) of 120 documents"


@dataclass(frozen=True)
class TimelineChart:
    width: int
    height: int
    left: int
    bottom: float  # y of the axis
    lines: list[str]  # SVG polyline points, one per run of periods with documents
    bands: list[str]  # SVG polygon points of the 95% range, one per run
    points: list[PeriodPoint]
    fitted: tuple[float, float, float, float] | None  # x1, y1, x2, y2 of the trend's straight line
    ticks: list[tuple[float, str]]  # (y, "20%")
    labels: list[tuple[float, str]]  # (x, period name): the first and the last period


def timeline_chart(shares: pd.DataFrame, names: list[str], trend_change: float | None) -> TimelineChart:
    """shares: one concept's rows of `Trends.shares` (period, n_period, n_documents, share, share_low, share_high,
    too_few), in period order; names: every period's name; trend_change: the fitted change over the span, drawn as a
    straight line (None: not drawn)."""
    end = axis_end(max(float(np.nanmax(shares["share_high"].to_numpy(), initial=0.0)), 0.01))
    last = max(len(names) - 1, 1)
    span_x, span_y = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(period: float) -> float:
        return round(LEFT + period / last * span_x, 1)

    def y(share: float) -> float:
        return round(TOP + (1 - share / end) * span_y, 1)

    rows = shares[shares["n_period"] > 0]
    breaks = [0, *(np.flatnonzero(np.diff(rows["period"].to_numpy()) > 1) + 1), len(rows)]
    runs = [rows.iloc[start:end] for start, end in itertools.pairwise(breaks) if end > start]
    lines = [" ".join(f"{x(r.period)},{y(r.share)}" for r in run.itertuples()) for run in runs]
    bands = [
        " ".join(
            [f"{x(r.period)},{y(r.share_high)}" for r in run.itertuples()]
            + [f"{x(r.period)},{y(r.share_low)}" for r in run[::-1].itertuples()]
        )
        for run in runs
    ]
    points = [
        PeriodPoint(
            x(r.period),
            y(r.share),
            bool(r.too_few),
            f"{names[r.period]}: {percent(r.share)} ({percent(r.share_low)} to {percent(r.share_high)}) of "
            f"{r.n_period:,} documents",
        )
        for r in rows.itertuples()
    ]
    return TimelineChart(
        WIDTH,
        HEIGHT,
        LEFT,
        HEIGHT - BOTTOM,
        lines,
        bands,
        points,
        _fitted(rows, trend_change, x, y),
        [(y(share), f"{share:.0%}") for share in axis_ticks(end)],
        [(x(0), names[0]), (x(len(names) - 1), names[-1])] if len(names) > 1 else [(x(0), names[0])],
    )


Place = Callable[[float], float]


def _fitted(rows: pd.DataFrame, change: float | None, x: Place, y: Place) -> tuple[float, float, float, float] | None:
    """The trend test's straight line (least squares, each period weighted by its documents) over the periods with
    documents: through the mean share at the mean period, rising by `change` over the span."""
    if change is None or len(rows) < 2 or math.isnan(change):
        return None
    weights, periods = rows["n_period"].to_numpy(float), rows["period"].to_numpy(float)
    mean_period = float((weights * periods).sum() / weights.sum())
    mean_share = float(rows["n_documents"].sum() / weights.sum())
    slope = change / (periods[-1] - periods[0])
    first, last = periods[0], periods[-1]
    at = (mean_share + slope * (first - mean_period), mean_share + slope * (last - mean_period))
    return x(first), y(min(max(at[0], 0.0), 1.0)), x(last), y(min(max(at[1], 0.0), 1.0))
