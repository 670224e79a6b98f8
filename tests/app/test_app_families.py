"""Families page: the graph handed to streamlit-agraph, the families list, rebuilding with another tau."""

import json

from app_helpers import new_app, open_page, table, texts

from prisma_core import pipeline
from prisma_core.concepts.families import FamilyConfig, find_families
from ui.family_graph import MAX_DRAWN, ROW_HEIGHT, SEVERAL, family_view
from ui.state import FEATURE_KEY, bump_revision
from ui.themes import ALL_THEMES

pytest_plugins = ["app_fixtures"]  # the shared trained workspace


def families_page(trained_app):
    at = new_app(trained_app.dataset_id, trained_app.run_id)
    open_page(at, "families")
    return at.selectbox(key="family_theme").select(ALL_THEMES).run()  # every family, not one theme's


def graph_data(at) -> dict:
    (component,) = at.get("component_instance")
    assert component.proto.component_name == "streamlit_agraph.agraph"
    return json.loads(json.loads(component.proto.json_args)["data"])


def test_graph_draws_readable_trees_of_the_most_frequent_members(trained_app):
    run = pipeline.load_run(trained_app.workspace, trained_app.run_id)
    density = run.features.set_index("feature_id")["density"]
    at = open_page(new_app(trained_app.dataset_id, trained_app.run_id), "families")  # opens on one theme
    assert not at.exception
    theme_of = run.features.set_index("feature_id")["theme_id"]
    theme = at.selectbox(key="family_theme").value
    first = sorted((f for f in run.families if theme_of[f.parent] == theme), key=lambda f: -len(f.members))[0]
    assert at.selectbox(key="family_shown").value == first.family_id  # one family by default, the theme's largest
    alone = graph_data(at)
    assert {int(node["id"]) for node in alone["nodes"]} == set(family_view(first, density, 2, 8).depth)
    layout = json.loads(json.loads(at.get("component_instance")[0].proto.json_args)["config"])
    assert int(layout["height"].removesuffix("px")) >= ROW_HEIGHT * len(alone["nodes"])  # its rows fit: no zoom-out
    largest = sorted(run.families, key=lambda f: -len(f.members))[:MAX_DRAWN]
    at.selectbox(key="family_theme").select(ALL_THEMES).run()
    at.selectbox(key="family_shown").select(SEVERAL).run()
    data = graph_data(at)
    drawn = {int(node["id"]): node for node in data["nodes"]}
    edges = {(int(e["from"]), int(e["to"])) for e in data["edges"]}
    views = [family_view(family, density, levels=2, max_members=8) for family in largest]
    assert set(drawn) == {member for view in views for member in view.depth}
    for member, node in drawn.items():  # a feature is drawn once, at a level it has in one of its families
        assert node["level"] in {view.depth[member] for view in views if member in view.depth}
    assert drawn[largest[0].parent]["level"] == 0
    for family, view in zip(largest, views, strict=True):
        assert len(view.depth) <= 8 and view.hidden == len(family.members) - len(view.depth)
        assert view.depth[family.parent] == 0
        for member, level in view.depth.items():
            if member != family.parent:  # every drawn member hangs from a drawn parent, at most 2 levels down
                (parent,) = [p for p, c, _ in family.edges if c == member]
                assert (parent, member) in edges and level == view.depth[parent] + 1 <= 2
        children = sorted((c for p, c, _ in family.edges if p == family.parent), key=lambda c: -density[c])
        shown = [c for c in children if c in view.depth]
        assert shown == children[: len(shown)]  # the most frequent children come first
    assert all(len(node["label"].split("  (+")[0]) <= 28 + 20 for node in drawn.values())  # short labels, escaped
    for parent, child in edges:
        assert density[parent] >= density[child]
    layout = json.loads(json.loads(at.get("component_instance")[0].proto.json_args)["config"])
    assert layout["layout"]["hierarchical"]["enabled"] and layout["layout"]["hierarchical"]["direction"] == "LR"
    assert layout["layout"]["hierarchical"]["sortMethod"] == "directed" and not layout["physics"]["enabled"]

    at.number_input(key="family_levels").set_value(6)
    at.number_input(key="family_members").set_value(200).run()  # everything, on demand
    data = graph_data(at)
    assert {node["id"] for node in data["nodes"]} == {str(m) for f in largest for m in f.members}
    assert {(e["from"], e["to"]) for e in data["edges"]} == {(str(p), str(c)) for f in largest for p, c, _ in f.edges}


def test_node_tooltips_are_escaped_and_labels_stay_plain_text(trained_app):
    workspace, run_id = trained_app.workspace, trained_app.run_id
    at = families_page(trained_app)
    feature = int(graph_data(at)["nodes"][0]["id"])
    keyword_label = workspace.labels.of(run_id).query(f"feature_id == {feature}")["interpretation_id"].iloc[0]
    workspace.labels.add(
        run_id,
        [{"feature_id": feature, "interpretation_id": "htmllabel01", "label": "<b>x</b> & y", "source": "manual"}],
    )
    workspace.labels.prefer(run_id, feature, "htmllabel01")
    bump_revision(run_id)
    at.run()
    node = next(node for node in graph_data(at)["nodes"] if node["id"] == str(feature))
    assert node["label"].split("  (+")[0] == f"#{feature} <b>x</b> & y"  # drawn on a canvas: plain text
    assert node["title"].startswith(f"#{feature} &lt;b&gt;x&lt;/b&gt; &amp; y · active on")
    workspace.labels.prefer(run_id, feature, keyword_label)
    bump_revision(run_id)


def test_families_list_matches_the_store(trained_app):
    at = families_page(trained_app)
    run = pipeline.load_run(trained_app.workspace, trained_app.run_id)
    shown = table(at, "family", "parent", "children")
    assert len(shown) == len(run.families)
    by_id = {f.family_id: f for f in run.families}
    labels = run.features.set_index("feature_id")["label"]
    for row in shown.head(10).itertuples():
        family = by_id[row.family]
        assert row.parent == f"#{family.parent} {labels[family.parent]}"
        assert row.size == len(family.members)
    n_features = len({m for f in run.families for m in f.members})
    assert f"{len(run.families)} families over {n_features:,} features" in texts(at.caption)


def test_rebuilding_with_a_higher_tau_gives_the_core_result(trained_app, tmp_path):
    at = families_page(trained_app)
    at.slider(key="tau").set_value(0.5)
    at.number_input(key="iterations").set_value(2)
    at.button(key="FormSubmitter:families_form-Rebuild families").click().run()
    assert not at.exception
    run = pipeline.load_run(trained_app.workspace, trained_app.run_id)
    expected = find_families(run.codes, FamilyConfig(tau=0.5, iterations=2))
    assert [f.members for f in run.families] == [f.members for f in expected]
    assert len(table(at, "family", "parent", "children")) == len(expected)
    reopened = families_page(trained_app)  # the form starts from the settings that made the families shown
    assert (reopened.slider(key="tau").value, reopened.number_input(key="iterations").value) == (0.5, 2)
    pipeline.export_run(trained_app.workspace, trained_app.run_id, tmp_path)
    exported = json.loads((tmp_path / "config.json").read_text())
    assert (exported["config"]["families"]["tau"], exported["config"]["families"]["iterations"]) == (0.5, 2)
    assert exported["metrics"]["n_families"] == len(expected)
    pipeline.rebuild_families(trained_app.workspace, trained_app.run_id, FamilyConfig())
    bump_revision(trained_app.run_id)


def test_card_of_the_clicked_feature(trained_app):
    at = new_app(trained_app.dataset_id, trained_app.run_id)
    at.session_state[FEATURE_KEY] = 3  # what a click on node "3" stores
    open_page(at, "families")
    label = pipeline.load_run(trained_app.workspace, trained_app.run_id).features.set_index("feature_id").at[3, "label"]
    assert f"Feature #3: {label}" in texts(at.subheader)
