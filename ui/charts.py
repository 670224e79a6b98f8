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
