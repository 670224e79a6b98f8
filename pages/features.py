"""Features: a searchable, sortable table of every feature, and the card of the one chosen."""

import streamlit as st

from prisma_core.explore import search_features
from prisma_core.pipeline import family_membership
from ui.cards import feature_card, feature_options
from ui.navigation import route_here
from ui.state import current_feature, open_feature, require_run
from ui.text import md

route_here()

PICK_KEY = "feature_pick"
TABLE_PICK_KEY = "features_table_pick"

run = require_run()
st.title("Features")
st.markdown(
    "Each feature is a concept the sparse autoencoder found. **Density** is how many documents it is active on. "
    "Labels start as distinctive keywords of the documents that activate the feature; rename any feature on its "
    "card. Click a row (or use the picker) to open a feature's card."
)

query = st.text_input("Search labels and descriptions", key="feature_search", placeholder="e.g. cardiac")
matches = search_features(run, query).merge(family_membership(run.families), on="feature_id", how="left")
TABLE_COLUMNS = [
    "feature_id",
    "label",
    "density",
    "density_fraction",
    "mean_activation",
    "max_activation",
    "score_embedding",
    "label_source",
    "family_id",
]
table = matches[TABLE_COLUMNS].reset_index(drop=True)
number = st.column_config.NumberColumn
event = st.dataframe(
    table,
    hide_index=True,
    key="features_table",
    on_select="rerun",
    selection_mode="single-row",
    column_config={
        "feature_id": number("feature", format="%d"),
        "label": st.column_config.TextColumn(width="large"),
        "density": number("documents", help="Documents the feature is active on."),
        "density_fraction": number("share", format="percent"),
        "mean_activation": number("mean act.", format="%.3f"),
        "max_activation": number("max act.", format="%.3f"),
        "score_embedding": number(
            "label score",
            format="%.2f",
            help="How well the label's embedding separates "
            "activating from other documents (ROC-AUC; empty until scored).",
        ),
        "label_source": "label from",
        "family_id": number("family", format="%d"),
    },
)
n_dead = int((run.features["density"] == 0).sum())
st.caption(
    f"{len(matches):,} of {len(run.features):,} features shown"
    + (f" · {n_dead:,} never fire on this dataset (dead)" if n_dead else "")
    + (f" · matching “{md(query)}”" if query.strip() else "")
)

rows = event.selection.rows
if rows and st.session_state.get(TABLE_PICK_KEY) != int(table["feature_id"].iloc[rows[0]]):
    st.session_state[TABLE_PICK_KEY] = int(table["feature_id"].iloc[rows[0]])
    open_feature(st.session_state[TABLE_PICK_KEY])

options = feature_options(run)
st.session_state[PICK_KEY] = current_feature(run)
feature_id = st.selectbox(
    "Feature",
    list(options),
    format_func=options.__getitem__,
    key=PICK_KEY,
    on_change=lambda: open_feature(st.session_state[PICK_KEY]),
)
st.divider()
feature_card(run, feature_id, key="features")
