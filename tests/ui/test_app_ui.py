"""The UI helpers without a browser: safe text, run names in words, the progress panel's stage names."""

from dataclasses import replace

import pytest

from prisma_core.interpret.keywords import UNNAMED_LABEL
from prisma_core.pipeline.labelling.storing import FAMILIES, THEMES
from ui.progress import STAGE_NAMES
from ui.text import feature_name, html_text, md, snippet


def test_user_text_is_escaped_for_markdown_and_html():
    assert md("**bold** [link](http://x.y) <b>") == r"\*\*bold\*\* \[link\]\(http\://x\.y\) \<b\>"
    assert md(None) == "" and md(float("nan")) == ""
    assert md("two\nlines") == "two lines"
    assert html_text("<script>alert('x')</script> & co") == "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; co"
    assert html_text("abcdefghij", limit=5) == "abcd…"
    assert snippet("a  b\n\nc", 10) == "a b c" and snippet("x" * 30, 10) == "x" * 9 + "…"
    assert feature_name(12, "chest · pain") == "#12 chest · pain" and feature_name(3, None) == "#3"


def test_a_feature_whose_label_ends_with_its_number_is_not_numbered_twice():
    assert feature_name(14, f"{UNNAMED_LABEL} #14") == "#14 (no shared words)"
    assert feature_name(14, "troop surge #2004") == "#14 troop surge #2004"  # another number is part of the label


def run_record(fvu_train: float, fvu_holdout: float, epochs: int = 40, n_features: int = 3072, **metrics):
    from prisma_core.store import RunRecord

    return RunRecord(
        run_id="run-x",
        dataset_id="ds-x",
        created_at="2026-11-23T12:20:00+00:00",
        embedding_key="all-MiniLM-L6-v2",
        config={
            "sae": {"n_features": n_features, "k": 32, "epochs": epochs},
            "embed": {"model": "all-MiniLM-L6-v2"},
        },
        metrics={"fvu_train": fvu_train, "fvu_holdout": fvu_holdout} | metrics,
        history=[],
        weights_dir="",
        versions={},
    )


def test_runs_get_readable_names_and_overfitting_is_said_in_words():
    from prisma_core.reading.run_quality import comes_back, overfitting, run_name

    demo_like = run_record(0.015, 0.535)  # the demo's run in issue 11: train 0.015, held out 0.535
    assert run_name(demo_like, "MTSamples demo") == (
        "MTSamples demo · 23 Nov 2026 12:20 · 3,072 features · fair (46% of detail) · overfitted"
    )
    message = overfitting(demo_like)
    assert "almost perfectly (98% of their detail)" in message and "much less well (46%)" in message
    assert "fewer epochs (try 20 instead of 40), fewer features (try 1536 instead of 3072) or more documents" in message
    healthy = run_record(0.25, 0.29)
    assert overfitting(healthy) is None
    assert run_name(healthy) == "23 Nov 2026 12:20 · 3,072 features · good (71% of detail)"
    assert comes_back(healthy) == "not checked (trained once)"
    compared = run_record(0.55, 0.6, n_features=80, features_kept=61, n_trainings=3, found_in_all=44)
    assert run_name(compared) == "23 Nov 2026 12:20 · 61 features · fair (40% of detail)"
    assert comes_back(compared) == "44 of 61 (3 trainings)"
    assert "FVU" not in run_name(healthy) and "k32" not in run_name(healthy)
    legacy = run_record(0.25, 0.29)
    legacy.config["sae"] = {"expansion_factor": 8, "k": 32}  # recorded before runs counted their features
    assert run_name(legacy) == "23 Nov 2026 12:20 · good (71% of detail)"


def test_a_run_whose_features_mostly_never_fire_is_not_called_good():
    """Issue 26: a category column as the text gave "good (94% of detail)" with 94.8% of features never firing."""
    from prisma_core.reading.run_quality import quality_words

    category_as_text = replace(run_record(0.05, 0.06), metrics={"fvu_train": 0.05, "fvu_holdout": 0.06})
    assert quality_words(category_as_text) == "good (94% of detail)"  # without the share of dead features
    category_as_text.metrics["dead_fraction"] = 0.948
    assert quality_words(category_as_text) == "poor (95% of features never fire)"
    category_as_text.metrics["dead_fraction"] = 0.2
    assert quality_words(category_as_text) == "good (94% of detail)"


@pytest.mark.parametrize(
    ("fvu_holdout", "words"),
    [
        (0.48, "about half of what sets each document apart (52%,"),
        (0.66, "about a third of what sets each document apart (34%,"),
        (0.42, "about three fifths of what sets each document apart (58%,"),
        (0.97, "almost none of what sets each document apart (3%,"),
    ],
)
def test_detail_is_said_as_the_share_of_what_sets_documents_apart(fvu_holdout, words):
    """Issue 44: the bands say what they mean, in the nearest plain share, with the measured figure beside it."""
    from prisma_core.reading.run_quality import detail_in_words

    record = run_record(0.3, fvu_holdout)
    assert detail_in_words(record) == f"explains {words} on documents it was not trained on)"
    record.metrics.pop("fvu_holdout")
    assert detail_in_words(record) is None


def test_training_curve_legends_show_every_name_whole():
    """Issue 26: the legend read "detail missed, training d…" (Vega cuts labels at 160 px unless told not to)."""
    from ui.charts import METRIC_NAMES, training_curves

    history = [
        {"step": step, "loss": 1.0 / step, "fvu": 0.5, "fvu_holdout": 0.6, "dead_fraction": 0.1} for step in (1, 2)
    ]
    spec = training_curves(history).to_dict()
    legend = spec["encoding"]["color"]["legend"]
    assert legend["labelLimit"] == 0 and legend["columns"] == 2
    shown = {row["metric"] for row in next(iter(spec["datasets"].values()))}
    assert shown == set(METRIC_NAMES.values())


def test_glossary_entries_are_headed_as_written_with_words_capitalised():
    """Issue 26: the glossary's tau entry was headed with a capital tau, k's with "K", and it had no entry for Theme."""
    from ui.glossary import TERMS, term_title

    headings = [term_title(term) for term in TERMS]
    assert {"Theme", "Never-firing features", "τ (tau)", "k (features per document)", "Label score"} <= set(headings)
    assert not [heading for heading in headings if heading[0] in ("\u03a4", "K")]  # a capital tau, a capital k


def test_every_stage_the_pipeline_reports_has_a_plain_name(small_run):
    """A job's panel shows STAGE_NAMES[stage]; a stage without one showed its internal name ("ingest", "check")."""
    assert {"check", "ingest", "embed", "train_sae", "label", "themes", "families"} <= small_run.stages
    assert small_run.stages | {FAMILIES.stage, THEMES.stage} <= STAGE_NAMES.keys()


def test_the_family_graph_hands_vis_js_only_options_it_knows():
    """Issue 45: the graph's config carried streamlit-agraph's keywords (direction, nodeSpacing, solver...) as
    top-level options, each an "Unknown option" error in the browser's console."""
    from ui.family_graph import VIS_OPTIONS, graph_config

    tree, free = graph_config(True, 12).to_dict(), graph_config(False, 12).to_dict()
    assert set(tree) <= VIS_OPTIONS and set(free) <= VIS_OPTIONS
    assert tree["layout"]["hierarchical"] | {"enabled": True} == tree["layout"]["hierarchical"]
    assert (tree["layout"]["hierarchical"]["direction"], tree["physics"]["enabled"]) == ("LR", False)
    assert free["physics"]["solver"] == "forceAtlas2Based" and free["physics"]["timestep"] == 0.35
    assert free["physics"]["forceAtlas2Based"]["avoidOverlap"] == 1.0
