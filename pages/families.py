"""Families: parent -> children trees of features, drawn as a graph; click a node to open its card."""

import math

import pandas as pd
import streamlit as st
from streamlit_agraph import Config, Edge, Node, agraph

from prisma_core import pipeline
from prisma_core.errors import PrismaError
from prisma_core.families import FamilyConfig
from prisma_core.pipeline import LoadedRun
from ui.cards import feature_card
from ui.help import FAMILY_HELP
from ui.navigation import route_here
from ui.state import bump_revision, current_feature, open_feature, require_run, workspace
from ui.text import html_text, md

route_here()

HELP = FAMILY_HELP
PALETTE = ["#6C4AB6", "#E4572E", "#17BEBB", "#FFC914", "#2E282A", "#76B041", "#3A86FF", "#FF006E", "#8D6B94"]
MAX_DRAWN = 8
ALL = -1
CLICK_KEY = "families_last_click"

run = require_run()
st.title("Feature families")
st.markdown(
    "Features are not independent: a general concept (the **parent**) fires on most documents where its more "
    "specific **children** fire. Families are trees built from how often features fire together: an arrow goes "
    "from the denser parent to the sparser child. Node size shows how many documents a feature is active on."
)


def rebuild_form(run: LoadedRun) -> None:
    stored = FamilyConfig(**run.record.config.get("families", {}))
    with st.form("families_form"):
        left, middle, right = st.columns(3)
        tau = left.slider("τ (tau)", 0.0, 1.0, stored.tau, 0.01, help=HELP["tau"], key="tau")
        iterations = middle.number_input("Iterations", 1, 10, stored.iterations, help=HELP["iterations"], key="iters")
        min_size = right.number_input(
            "Smallest family", 2, 100, stored.min_family_size, help=HELP["min_family_size"], key="min_size"
        )
        if not st.form_submit_button("Rebuild families"):
            return
    try:
        config = FamilyConfig(tau=float(tau), iterations=int(iterations), min_family_size=int(min_size))
        with st.spinner("Rebuilding families…"):
            pipeline.rebuild_families(workspace(), run.record.run_id, config)
    except (PrismaError, ValueError) as error:
        st.error(md(error), icon=":material/error:")
        return
    bump_revision(run.record.run_id)
    st.rerun()


def graph(run: LoadedRun, families: list[dict]) -> str | None:
    """Draw the families; returns the id of the clicked node, if any."""
    features = run.features.set_index("feature_id")
    largest_density = max(int(features["density"].max()), 1)
    nodes: dict[str, Node] = {}
    edges = []
    for index, family in enumerate(families):
        color = PALETTE[index % len(PALETTE)]
        for member in family["members"]:
            row = features.loc[member]
            nodes.setdefault(
                str(member),
                Node(
                    id=str(member),
                    label=html_text(f"#{member} {row['label']}", limit=40),
                    title=html_text(f"#{member} {row['label']} · active on {int(row['density']):,} documents"),
                    size=10 + 30 * math.sqrt(int(row["density"]) / largest_density),
                    color=color,
                    font={"size": 16},
                ),
            )
        for parent, child, weight in family["edges"]:
            edges.append(Edge(source=str(parent), target=str(child), width=1 + 3 * float(weight), color="#9A8FB8"))
    config = Config(height=620, directed=True, physics=True, hierarchical=st.session_state.get("tree_layout", False))
    config.width = "100%"
    return agraph(list(nodes.values()), edges, config)


def families_table(run: LoadedRun, families: list[dict]) -> None:
    label_of = run.features.set_index("feature_id")["label"]
    rows = [
        {
            "family": family["family_id"],
            "label": family["label"],
            "parent": f"#{family['parent']} {label_of.get(family['parent'], '')}",
            "children": " · ".join(f"#{m} {label_of.get(m, '')}" for m in family["members"][1:]),
            "size": len(family["members"]),
            "round": family["iteration"] + 1,
        }
        for family in families
    ]
    st.dataframe(pd.DataFrame(rows), hide_index=True, key="families_table")


rebuild_form(run)
families = sorted(run.families, key=lambda f: -len(f["members"]))
if not families:
    st.info("No families at this τ: lower τ and rebuild, or train with more documents.")
    st.stop()

st.caption(f"{len(families)} families over {len({m for f in families for m in f['members']}):,} features")
options = [ALL, *[f["family_id"] for f in families]]
by_id = {f["family_id"]: f for f in families}
left, right = st.columns([3, 1])
shown = left.selectbox(
    "Family to draw",
    options,
    format_func=lambda i: (
        f"The {min(MAX_DRAWN, len(families))} largest families"
        if i == ALL
        else f"Family {i}: {by_id[i]['label']} ({len(by_id[i]['members'])} features)"
    ),
    key="family_shown",
)
right.toggle("Tree layout", key="tree_layout", help="Parents above their children instead of a free layout.")
drawn = families[:MAX_DRAWN] if shown == ALL else [by_id[shown]]
clicked = graph(run, drawn)
if clicked is not None and clicked != st.session_state.get(CLICK_KEY):
    st.session_state[CLICK_KEY] = clicked
    open_feature(int(clicked))

st.subheader("All families")
families_table(run, families)
st.divider()
st.caption("Click a node in the graph to open its feature card here.")
feature_card(run, current_feature(run), key="families")
