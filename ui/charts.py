"""Altair chart builders. Every label shown in a chart comes from data fields, which Vega renders as text."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from ui.text import feature_name

PRIMARY = "#6C4AB6"  # the theme's primary colour (.streamlit/config.toml)
METRIC_NAMES = {
    "loss": "training loss",
    "fvu": "detail missed, training documents",
    "fvu_holdout": "detail missed, unseen documents",
    "dead_fraction": "share of never-firing features",
}


def training_curves(history: Sequence[dict[str, float]]) -> alt.Chart:
    """Loss, FVU and dead fraction per optimiser step (history entries from training progress or a run record)."""
    frame = pd.DataFrame(list(history))
    metrics = [name for name in METRIC_NAMES if name in frame]
    long = frame.melt(id_vars="step", value_vars=metrics, var_name="metric").dropna()
    long["metric"] = long["metric"].map(METRIC_NAMES)
    return (
        alt.Chart(long, height=260)
        .mark_line(point=alt.OverlayMarkDef(size=12))
        .encode(
            x=alt.X("step:Q", title="training step", axis=alt.Axis(format="d", tickMinStep=1)),
            y=alt.Y("value:Q", title=None, scale=alt.Scale(zero=True)),
            # labelLimit 0: whole names ("detail missed, training documents"), never cut at Vega's 160 px;
            # two columns keep the four names within a narrow chart
            color=alt.Color("metric:N", title=None, legend=alt.Legend(orient="top", labelLimit=0, columns=2)),
            tooltip=["metric:N", "step:Q", alt.Tooltip("value:Q", format=".4f")],
        )
    )


def activation_histogram(values: np.ndarray, bins: int = 30) -> alt.Chart:
    """Distribution of a feature's activation values over the documents where it is active."""
    frame = pd.DataFrame({"activation": values.astype(float)})
    return (
        alt.Chart(frame, height=200)
        .mark_bar(color=PRIMARY)
        .encode(
            x=alt.X("activation:Q", bin=alt.Bin(maxbins=bins), title="activation (active documents only)"),
            y=alt.Y("count():Q", title="documents"),
            tooltip=[alt.Tooltip("count():Q", title="documents")],
        )
    )


def feature_bars(frame: pd.DataFrame, value: str = "value", title: str = "activation") -> alt.Chart:
    """Horizontal bars, one per feature (columns feature_id, label, and `value`), strongest on top."""
    named = frame.assign(
        feature=[feature_name(f, label) for f, label in zip(frame["feature_id"], frame["label"], strict=True)]
    )
    return (
        alt.Chart(named, height=alt.Step(26))
        .mark_bar(color=PRIMARY)
        .encode(
            x=alt.X(f"{value}:Q", title=title),
            y=alt.Y("feature:N", sort="-x", title=None, axis=alt.Axis(labelLimit=360)),
            tooltip=["feature:N", alt.Tooltip(f"{value}:Q", format=".3f")],
        )
    )


def heatmap(matrix: np.ndarray, names: Sequence[str], title: str, value_title: str) -> alt.Chart:
    """A square matrix over features (rows and columns in `names` order)."""
    rows, cols = np.indices(matrix.shape)
    frame = pd.DataFrame(
        {
            "row": np.asarray(names)[rows.ravel()],
            "column": np.asarray(names)[cols.ravel()],
            "value": matrix.ravel().astype(float),
        }
    )
    order = list(names)
    axis = alt.Axis(labelLimit=160)
    return (
        alt.Chart(frame, title=title, height=420)
        .mark_rect()
        .encode(
            x=alt.X("column:N", sort=order, title=None, axis=axis),
            y=alt.Y("row:N", sort=order, title=None, axis=axis),
            color=alt.Color("value:Q", title=value_title, scale=alt.Scale(scheme="purples")),
            tooltip=["row:N", "column:N", alt.Tooltip("value:Q", format=".2f")],
        )
    )


def group_prevalence(frame: pd.DataFrame, concepts: Sequence[str], groups: Sequence[str]) -> alt.Chart:
    """Prevalence of concepts per group: columns group, concept (name), prevalence. Every group gets its own column
    and its name on the axis (labels never hidden for overlap); concepts are rows in the given order."""
    return (
        alt.Chart(frame, height=alt.Step(22), width=alt.Step(34))
        .mark_rect()
        .encode(
            x=alt.X(
                "group:N",
                title=None,
                sort=list(groups),
                axis=alt.Axis(labelAngle=-45, labelLimit=180, labelOverlap=False, orient="top"),
            ),
            y=alt.Y("concept:N", title=None, sort=list(concepts), axis=alt.Axis(labelLimit=320, labelOverlap=False)),
            color=alt.Color("prevalence:Q", title="share of group", scale=alt.Scale(scheme="purples")),
            tooltip=["group:N", "concept:N", alt.Tooltip("prevalence:Q", format=".1%")],
        )
    )


VERDICT_COLOURS = {"rising": "#1b7f3b", "falling": "#c77700"}
"""How a concept's line is coloured by its verdict over the span (any other verdict: grey)."""
STEADY_COLOUR = "#7f7f7f"


def shares_over_time(frame: pd.DataFrame, concepts: Sequence[str], period: str) -> alt.Chart:
    """One small chart per concept (in the given order): its share per period as a line, its 95% range as a band,
    hollow points for periods with too few documents, coloured by its verdict. frame: concept, verdict,
    period_start, period_name, n_period, n_documents, share, share_low, share_high, too_few."""
    verdicts = sorted(set(frame["verdict"]))
    colour = alt.Color(
        "verdict:N",
        title="over the whole span",
        scale=alt.Scale(domain=verdicts, range=[VERDICT_COLOURS.get(v, STEADY_COLOUR) for v in verdicts]),
        legend=alt.Legend(orient="top", labelLimit=0),
    )
    x = alt.X("period_start:T", title=period, axis=alt.Axis(labelOverlap=True))
    tooltip = [
        "concept:N",
        alt.Tooltip("period_name:N", title=period),
        alt.Tooltip("share:Q", format=".1%"),
        alt.Tooltip("share_low:Q", title="95% range from", format=".1%"),
        alt.Tooltip("share_high:Q", title="95% range to", format=".1%"),
        alt.Tooltip("n_documents:Q", title="documents with it"),
        alt.Tooltip("n_period:Q", title="documents in the period"),
    ]
    base = alt.Chart(frame[frame["n_period"] > 0])
    band = base.mark_area(opacity=0.18).encode(x=x, y="share_low:Q", y2="share_high:Q", color=colour)
    line = base.mark_line().encode(
        x=x, y=alt.Y("share:Q", title="share of the period's documents", axis=alt.Axis(format="%")), color=colour
    )
    points = base.mark_point(size=36, filled=True).encode(
        x=x,
        y="share:Q",
        color=colour,
        fill=alt.condition("datum.too_few", alt.value("white"), colour),
        tooltip=tooltip,
    )
    return (
        alt.layer(band, line, points)
        .properties(width=280, height=150)
        .facet(
            facet=alt.Facet("concept:N", title=None, sort=list(concepts), header=alt.Header(labelLimit=300)),
            columns=2,
        )
        .resolve_scale(y="independent")
    )
