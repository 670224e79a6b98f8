"""The family graph (Families page): which members to draw and how, so that a person can read it.

A family can have dozens of members; drawn all at once with free physics, 85 labelled nodes tangle. Instead each
family is drawn as a left-to-right tree (parent on the left, children to its right), limited to a few levels and to
its most frequent members, with short labels in boxes that the tree layout spaces apart. What is left out is counted
and can be shown on demand.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
from streamlit_agraph import Config, Edge, Node

from prisma_core.pipeline import NamedFamily
from ui.text import feature_name, html_text, snippet

PALETTE = ["#6C4AB6", "#E4572E", "#17BEBB", "#C9A227", "#2E282A", "#76B041", "#3A86FF", "#FF006E", "#8D6B94"]
LABEL_CHARS = 28
EDGE_COLOR = "#9A8FB8"
SEVERAL = -1
"""The family picker's last choice: the MAX_DRAWN largest families drawn together."""
MAX_DRAWN = 6
ROW_HEIGHT = 46  # pixels per drawn node in a tree (the layout's node spacing and a box)
MAX_TREE_HEIGHT = 4000


@dataclass
class FamilyView:
    """The members of one family chosen for drawing: feature id -> depth (0 = the parent)."""

    family_id: int
    depth: dict[int, int]
    edges: list[tuple[int, int, float]]
    hidden: int = 0
    children: dict[int, list[int]] = field(default_factory=dict)


def family_view(family: NamedFamily, density: pd.Series, levels: int, max_members: int) -> FamilyView:
    """Walk the family tree from its parent, level by level, children by decreasing density, keeping at most
    `levels` levels below the parent and `max_members` members in all (the tree stays connected)."""
    children: dict[int, list[int]] = {}
    weights = {}
    for parent, child, weight in family.edges:
        children.setdefault(int(parent), []).append(int(child))
        weights[(int(parent), int(child))] = float(weight)
    for kids in children.values():
        kids.sort(key=lambda f: (-int(density.get(f, 0)), f))
    root = family.parent
    depth = {root: 0}
    frontier = [root]
    while frontier:
        following = []
        for node in frontier:
            if depth[node] >= levels:
                continue
            for child in children.get(node, []):
                if child not in depth and len(depth) < max_members:
                    depth[child] = depth[node] + 1
                    following.append(child)
        frontier = following
    edges = [(p, c, w) for (p, c), w in weights.items() if p in depth and c in depth]
    return FamilyView(family.family_id, depth, edges, len(family.members) - len(depth), children)


def graph_elements(views: list[FamilyView], features: pd.DataFrame) -> tuple[list[Node], list[Edge]]:
    """vis.js nodes and edges: boxes with short labels (full label and size in the tooltip), one colour a family."""
    largest = max(int(features["density"].max()), 1)
    nodes: dict[str, Node] = {}
    edges = []
    for index, view in enumerate(views):
        color = PALETTE[index % len(PALETTE)]
        for member, level in view.depth.items():
            row = features.loc[member]
            more = len([c for c in view.children.get(member, []) if c not in view.depth])
            label = feature_name(member, row["label"])
            nodes.setdefault(
                str(member),
                Node(
                    id=str(member),
                    label=snippet(label, limit=LABEL_CHARS) + (f"  (+{more})" if more else ""),  # canvas: plain text
                    title=html_text(f"{label} · active on {int(row['density']):,} documents"),
                    shape="box",
                    color={"background": color if level == 0 else "#FFFFFF", "border": color},
                    font={"size": 14, "color": "#FFFFFF" if level == 0 else "#1F1B2E"},
                    borderWidth=1 + round(3 * int(row["density"]) / largest),
                    level=level,
                ),
            )
        for parent, child, weight in view.edges:
            edges.append(Edge(source=str(parent), target=str(child), width=1 + 3 * weight, color=EDGE_COLOR))
    return list(nodes.values()), edges


def graph_config(tree: bool, n_nodes: int) -> Config:
    """A left-to-right tree without physics (readable, stable), or a spread-out free layout. A tree's canvas is as
    tall as its rows need (up to MAX_TREE_HEIGHT), so the graph is drawn at full size instead of zoomed out to fit."""
    height = max(360, min(MAX_TREE_HEIGHT, ROW_HEIGHT * n_nodes + 80)) if tree else 640
    if tree:
        config = Config(
            height=height,
            directed=True,
            physics=False,
            hierarchical=True,
            direction="LR",
            sortMethod="directed",
            levelSeparation=300,
            nodeSpacing=44,
            treeSpacing=70,
        )
    else:
        config = Config(height=height, directed=True, physics=True, solver="forceAtlas2Based", timestep=0.35)
        config.physics["forceAtlas2Based"] = {"springLength": 160, "avoidOverlap": 1.0}
    config.width = "100%"
    # streamlit-agraph's Config also keeps every keyword it was given (direction, nodeSpacing, solver...) as a
    # top-level option, which vis.js refuses with an "Unknown option" error in the browser's console: they are
    # already in `layout` and `physics`, where vis.js reads them.
    config.__dict__ = {
        name: value for name, value in config.to_dict().items() if name in VIS_OPTIONS and value is not None
    }
    return config


VIS_OPTIONS = frozenset(
    {"height", "width", "autoResize", "edges", "nodes", "groups", "layout", "interaction", "physics"}
)
"""The top-level options vis.js Network knows (its docs' "options" object); streamlit-agraph passes the config
to it whole."""
