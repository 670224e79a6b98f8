"""Where the report's pictures put things: the map's dots coloured by theme, and each group's concepts as two
shares with their 95% ranges (in the group, elsewhere). Coordinates only: the templates draw them as inline SVG."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

PALETTE = (
    "#d95b5e",
    "#009aab",
    "#928519",
    "#2c85e2",
    "#009970",
    "#d15997",
    "#c0702e",
    "#0094d6",
    "#539339",
    "#a16eca",
    "#9a393d",
    "#006a77",
    "#645a02",
    "#025ba2",
    "#006a4a",
    "#943768",
    "#874a17",
    "#006699",
    "#336520",
    "#6f498f",
)
"""Theme colours, the app's map and the report's alike, by theme id: ten hues at one lightness, spread around the
colour wheel and ordered so that neighbouring themes get far-apart hues, then the same ten hues darker for themes
10 to 19 (reused in turn past 20). Vega's category20, used before, gives themes 0 and 1 two blues."""
NO_THEME_COLOUR = "#444444"
MAP_WIDTH, MAP_HEIGHT, MAP_MARGIN = 960, 620, 8
DOT_RADIUS = 2.6


@dataclass(frozen=True)
class Dot:
    x: float
    y: float
    colour: str
    title: str  # what hovering the dot shows (plain text; the template escapes it)


@dataclass(frozen=True)
class LegendEntry:
    name: str
    colour: str
    n_documents: int


def theme_colour(theme_id: int) -> str:
    return PALETTE[theme_id % len(PALETTE)] if theme_id >= 0 else NO_THEME_COLOUR


def map_dots(points: pd.DataFrame) -> list[Dot]:
    """points: x, y (a 2-D map), theme_id, title; placed in a MAP_WIDTH x MAP_HEIGHT picture, its shape kept."""
    xy = points[["x", "y"]].to_numpy(dtype=np.float64)
    if not len(xy):
        return []
    low, span = xy.min(axis=0), np.ptp(xy, axis=0)
    scale = min((MAP_WIDTH - 2 * MAP_MARGIN) / max(span[0], 1e-9), (MAP_HEIGHT - 2 * MAP_MARGIN) / max(span[1], 1e-9))
    offset = (np.array([MAP_WIDTH, MAP_HEIGHT]) - span * scale) / 2
    placed = np.round((xy - low) * scale + offset, 1)
    placed[:, 1] = MAP_HEIGHT - placed[:, 1]  # up is up
    themes, titles = points["theme_id"].tolist(), points["title"].tolist()
    return [
        Dot(float(x), float(y), theme_colour(int(t)), str(title))
        for (x, y), t, title in zip(placed, themes, titles, strict=True)
    ]


CHART_WIDTH, LABEL_WIDTH, ROW_HEIGHT, AXIS_HEIGHT = 900, 330, 30, 26


@dataclass(frozen=True)
class Share:
    """One share and its range, placed on the x axis."""

    x: float
    low: float
    high: float


@dataclass(frozen=True)
class RangeRow:
    name: str
    y: float
    group: Share
    rest: Share
    holds: bool


@dataclass(frozen=True)
class RangeChart:
    width: int
    height: int
    label_width: int
    rows: list[RangeRow]
    ticks: list[tuple[float, str]]  # (x, "20%")


def range_chart(rows: pd.DataFrame) -> RangeChart:
    """rows: concept (name), prevalence with prevalence_low/high, prevalence_rest with rest_low/high, holds; one
    line each, the axis from 0 to a round share above every range."""
    top = float(np.nanmax(rows[["prevalence_high", "rest_high"]].to_numpy(), initial=0.0))
    end = axis_end(max(top, 0.01))
    span = CHART_WIDTH - LABEL_WIDTH - 16

    def at(share: float) -> float:
        return round(LABEL_WIDTH + (0.0 if math.isnan(share) else share) / end * span, 1)

    placed = [
        RangeRow(
            name=str(row.concept),
            y=AXIS_HEIGHT + ROW_HEIGHT * (i + 0.5),
            group=Share(at(row.prevalence), at(row.prevalence_low), at(row.prevalence_high)),
            rest=Share(at(row.prevalence_rest), at(row.rest_low), at(row.rest_high)),
            holds=bool(row.holds),
        )
        for i, row in enumerate(rows.itertuples())
    ]
    ticks = [(at(share), f"{share:.0%}") for share in axis_ticks(end)]
    return RangeChart(CHART_WIDTH, AXIS_HEIGHT + ROW_HEIGHT * len(placed) + 4, LABEL_WIDTH, placed, ticks)


STEPS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5, 1.0)


def axis_end(share: float) -> float:
    """The smallest of 2%, 5%, 10%, 20%, ..., 100% at or above the share, in steps of a nice tick."""
    step = next(s for s in STEPS if share / s <= 5)
    return min(1.0, math.ceil(share / step - 1e-9) * step)


def axis_ticks(end: float) -> Sequence[float]:
    step = next(s for s in STEPS if end / s <= 5)
    return [i * step for i in range(round(end / step) + 1)]
