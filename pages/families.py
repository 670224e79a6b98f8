"""Families: parent -> children trees of features, drawn as a graph; click a node to open its card."""

from dataclasses import fields

import streamlit as st
from streamlit_agraph import agraph

from prisma_core import pipeline
from prisma_core.pipeline import LoadedRun, NamedFamily, PrismaError
from prisma_core.pipeline.settings import FamilyConfig
from ui.cards import feature_card
from ui.config_form import config_inputs
from ui.edits import edit_notices_view
from ui.family_graph import MAX_DRAWN, SEVERAL, family_view, graph_config, graph_elements
from ui.gates import require_run
from ui.glossary import explain
from ui.navigation import route_here
from ui.state import bump_revision, current_feature, open_feature, workspace
from ui.tables import rows_table
from ui.text import feature_name, md
from ui.themes import families_by_theme

route_here()

CLICK_KEY = "families_last_click"
FORM_FROM_KEY = "families_form_from"
"""(run id, FamilyConfig) the rebuild form's widgets were last filled from."""

run = require_run()
st.title("Feature families")
explain("family", "τ (tau)")
st.markdown(
    "Features are not independent: a general concept (the **parent**) fires on most documents where its more "
    "specific **children** fire. Families are trees built from how often features fire together: an arrow goes "
    "from the parent (filled box) to its children; a thicker border means more documents."
)
edit_notices_view(run, ("family",), key="families")


def rebuild_form(run: LoadedRun) -> None:
    """τ and the other settings, starting from those of the families shown: when they change (rebuilt here, in
    another session or by the command line), the form starts from the new ones."""
    stored = run.settings.families
    names = [field.name for field in fields(FamilyConfig)]
    if st.session_state.get(FORM_FROM_KEY) != (run.record.run_id, stored):
        for name in names:
            st.session_state.pop(name, None)
        st.session_state[FORM_FROM_KEY] = (run.record.run_id, stored)
    with st.form("families_form"):
        values = config_inputs(stored, names)
        if not st.form_submit_button("Rebuild families"):
            return
    try:
        config = FamilyConfig(**values)
        with st.spinner("Rebuilding families…"):
            pipeline.rebuild_families(workspace(), run.record.run_id, config)
    except PrismaError as error:
        st.error(md(error), icon=":material/error:")
        return
    bump_revision(run.record.run_id)
    st.rerun()


def graph(run: LoadedRun, families: list[NamedFamily], levels: int, max_members: int) -> str | None:
    """Draw the families as readable trees; returns the id of the clicked node, if any."""
    features = run.features.set_index("feature_id")
    views = [family_view(family, features["density"], levels, max_members) for family in families]
    nodes, edges = graph_elements(views, features)
    hidden = sum(view.hidden for view in views)
    if hidden:
        st.caption(
            f"Showing {len(nodes)} of {len(nodes) + hidden} members: the most frequent, up to {levels} level(s) below "
            "each parent. “(+n)” after a label counts children left out; show more levels or members above."
        )
    return agraph(nodes, edges, graph_config(not st.session_state.get("free_layout", False), len(nodes)))


def families_table(run: LoadedRun, families: list[NamedFamily]) -> None:
    label_of = run.features.set_index("feature_id")["label"]
    rows = [
        {
            "family": family.family_id,
            "label": family.label,
            "parent": feature_name(family.parent, label_of.get(family.parent)),
            "children": " · ".join(feature_name(m, label_of.get(m)) for m in family.members[1:]),
            "size": len(family.members),
            "round": family.iteration + 1,
        }
        for family in families
    ]
    text, number = st.column_config.TextColumn, st.column_config.NumberColumn
    columns = {
        "family": number("Family", format="%d"),
        "label": text("Label", width="medium"),
        "parent": text("Parent", width="medium"),
        "children": text("Children", width="large"),
        "size": number("Members"),
        "round": number("Found in round"),
    }
    rows_table(rows, "families_table", columns)


rebuild_form(run)
families = sorted(run.families, key=lambda f: -len(f.members))
families = families_by_theme(run, families)
if not families:
    st.info("No families at this τ: lower τ and rebuild, or train with more documents.")
    st.stop()

st.caption(f"{len(families)} families over {len({m for f in families for m in f.members}):,} features")
# One family by default, the largest: drawn alone its labels show at their full size (several families at once were
# zoomed out to fit, their labels too small to read). The several-at-once view stays on offer, last.
options = [*[f.family_id for f in families], *([SEVERAL] if len(families) > 1 else [])]
by_id = {f.family_id: f for f in families}
left, levels_column, members_column, layout_column = st.columns([4, 1, 1, 1])
shown = left.selectbox(
    "Family to draw",
    options,
    format_func=lambda i: (
        f"The {min(MAX_DRAWN, len(families))} largest families together"
        if i == SEVERAL
        else f"Family {i}: {by_id[i].label} ({len(by_id[i].members)} features)"
    ),
    key="family_shown",
    help="Families are drawn one at a time, the largest first; the families table below lists them all.",
)
levels = levels_column.number_input("Levels shown", 1, 6, 2, key="family_levels", help="Levels below each parent.")
max_members = members_column.number_input(
    "Members per family", 2, 200, 8, key="family_members", help="The most frequent members are drawn first."
)
layout_column.toggle("Free layout", key="free_layout", help="A force-directed layout instead of trees.")
drawn = families[:MAX_DRAWN] if shown == SEVERAL else [by_id[shown]]
clicked = graph(run, drawn, int(levels), int(max_members))
if clicked is not None and clicked != st.session_state.get(CLICK_KEY):
    st.session_state[CLICK_KEY] = clicked
    open_feature(int(clicked))

st.subheader("All families")
families_table(run, families)
st.divider()
st.caption("Click a node in the graph to open its feature card here.")
feature_card(run, current_feature(run), key="families")
