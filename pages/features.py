"""Features: a searchable, sortable table of every feature, and the card of the one chosen."""

import streamlit as st

from ui.cards import FEATURE_COLUMNS, feature_card, feature_options, features_table, reliable_summary
from ui.edits import edit_notices_view, edits_panel
from ui.gates import require_run
from ui.glossary import explain
from ui.navigation import route_here
from ui.state import current_feature, open_feature, revision
from ui.tables import clickable_table
from ui.text import md
from ui.themes import regroup_form, theme_detail, themes_overview

route_here()

PICK_KEY = "feature_pick"
TABLE_PICK_KEY = "features_table_pick"

run = require_run()
st.title("Features")
st.markdown(
    "Each feature is a concept the model found in your documents. Its label starts as the words that set its "
    "documents apart; rename any feature on its card. Click a row (or use the picker below) to open a feature's card."
)
explain("feature", "trainings compared", "background feature", "activation", "label score", "never-firing features")
edit_notices_view(run, ("theme", "subtheme", "feature"), key="features")
st.subheader("Themes")
themes_overview(run, key="features")
theme_detail(run, key="features")
regroup_form(run)
edits_panel(run)
st.subheader("All features")

query = st.text_input("Search labels and descriptions", key="feature_search", placeholder="e.g. cardiac")
table = features_table(run, query)
# The table's key changes with the search and with every label change, so a selected row never points into a
# table it was not clicked in (a row number from before a search or a save would open another feature).
table_key = f"features_table:{revision(run.record.run_id)}:{query.strip().lower()}"
clickable_table(table, table_key, "feature_id", FEATURE_COLUMNS, TABLE_PICK_KEY, open_feature)
n_dead = int((run.features["density"] == 0).sum())
st.caption(
    f"{len(table):,} of {len(run.features):,} features shown"
    + f" · {reliable_summary(run)}"
    + (f" · {n_dead:,} never fire on these documents" if n_dead else "")
    + (f" · matching “{md(query)}”" if query.strip() else "")
)
if query.strip() and table.empty:
    st.info(
        f"No feature label or description mentions “{md(query)}”. Try another word, or search documents by "
        "meaning on the Explore page."
    )

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
