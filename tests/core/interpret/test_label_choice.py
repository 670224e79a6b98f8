"""Labels chosen by their measured scores (prisma_core/interpret/label_choice.py): a model's label that scores worse
than the keywords, or no better than chance, does not replace them; the better label stays shown, a note says why,
and the analyst can still choose the other. Families, themes and sub-themes keep a name the model's scores worse
than."""

import json

import numpy as np
import pandas as pd
from labelling_run import active_features, labeller

from prisma_core import pipeline
from prisma_core.interpret.keywords import KEYWORD_SOURCE
from prisma_core.interpret.label_choice import CHANCE, LABEL_MARGIN, resolve_labels
from prisma_core.pipeline.labelling import LabelConfig, LabelScope, label_groups, label_run, label_scope
from prisma_core.pipeline.labelling.planning import subthemes_of
from prisma_core.store.schemas import MANUAL_SOURCE


def interpretations(rows: list[tuple]) -> pd.DataFrame:
    """(feature_id, label, source, score, preferred), oldest first."""
    frame = pd.DataFrame(rows, columns=["feature_id", "label", "source", "score_embedding", "preferred"])
    return frame.assign(
        description="",
        score_detection=np.nan,
        interpretation_id=[f"i{n}" for n in range(len(frame))],
        created_at=[f"2026-01-01T00:00:{n:02d}" for n in range(len(frame))],
    )


def test_a_model_label_that_scores_worse_than_the_keywords_does_not_replace_them():
    shown = resolve_labels(
        interpretations(
            [
                (0, "heart · valve", KEYWORD_SOURCE, 0.89, False),
                (0, "field", "llama3.2", 0.45, False),  # below chance: the case
                (1, "knee · arthroscopy", KEYWORD_SOURCE, 0.89, False),
                (1, "knee surgery", "llama3.2", 0.89 - LABEL_MARGIN / 2, False),  # within the margin: replaces
                (2, "tax · budget", KEYWORD_SOURCE, 0.90, False),
                (2, "money", "llama3.2", 0.80, False),  # clearly worse
                (3, "rain · storm", KEYWORD_SOURCE, np.nan, False),
                (3, "weather", "llama3.2", 0.40, False),  # nothing to compare with: the model's label
                (4, "goal · match", KEYWORD_SOURCE, 0.85, False),
                (4, "group", "llama3.2", 0.45, True),  # the analyst chose it: their choice stands
                (5, "vote · poll", KEYWORD_SOURCE, 0.80, False),
                (5, "my words", MANUAL_SOURCE, np.nan, False),  # a rename undone: not shown
                (6, "stars", "llama3.2", 0.30, False),  # no keyword label at all
                (7, "piano · violin", KEYWORD_SOURCE, 0.40, False),
                (7, "music", "llama3.2", CHANCE, False),  # at chance, but the keywords score lower still
            ]
        )
    ).set_index("feature_id")
    expected = {
        0: "heart · valve",
        1: "knee surgery",
        2: "tax · budget",
        3: "weather",
        4: "group",
        5: "vote · poll",
        6: "stars",
        7: "music",
    }
    assert shown["label"].to_dict() == expected
    assert shown.loc[[0, 2], "label_source"].tolist() == [KEYWORD_SOURCE] * 2
    assert shown.loc[[0, 2], "set_aside"].tolist() == ["i1", "i5"]  # the model's labels, kept to be chosen
    assert shown["set_aside"].drop(index=[0, 2]).isna().all()
    assert shown.at[0, "label_note"] == (
        "The language model named this feature “field”, but that label scores 0.45, no better than chance (0.50) "
        "where the keywords score 0.89: the keywords stay shown. Pick either label on the feature's card."
    )
    assert "scores 0.80 where the keywords score 0.90" in shown.at[2, "label_note"]
    assert (shown["label_note"].drop(index=[0, 2]) == "").all()


def test_a_labelled_run_shows_the_better_label_of_each_feature_and_says_why(workspace, base_run, fake, tmp_path):
    """A model that names every feature "Field" (the issue's labels): where that scores worse than the keywords,
    the keywords stay shown everywhere (the feature list, the export), with the reason; chosen on the card, the
    model's label is shown."""
    features = active_features(workspace, base_run.run_id, 6)
    fake.responder = lambda request: json.dumps({"label": "Field", "description": "Documents about a field."})
    label_run(workspace, pipeline.load_run(workspace), labeller(fake), feature_ids=features)

    stored = workspace.labels.of(base_run.run_id).set_index(["feature_id", "source"])["score_embedding"]
    run = pipeline.load_run(workspace).features.set_index("feature_id")
    set_aside = [f for f in features if run.at[f, "label_source"] == KEYWORD_SOURCE]
    assert set_aside, "a one-word label for every feature scores worse than most features' keywords"
    for feature in features:
        model, keywords = stored[(feature, "llama3.2")], stored[(feature, KEYWORD_SOURCE)]
        worse = model < keywords - LABEL_MARGIN or (model <= CHANCE < keywords)
        assert (feature in set_aside) == worse
        assert (run.at[feature, "label"] == "Field") == (not worse)
        if worse:
            assert f"scores {model:.2f}" in run.at[feature, "label_note"]
            assert f"keywords score {keywords:.2f}" in run.at[feature, "label_note"]
    pipeline.export_run(workspace, None, tmp_path / "export")
    exported = pd.read_parquet(tmp_path / "export" / "features.parquet").set_index("feature_id")
    assert (exported.loc[set_aside, "label_source"] == KEYWORD_SOURCE).all()
    assert exported.loc[set_aside, "label_note"].str.contains("“Field”").all()

    chosen = set_aside[0]  # the analyst picks the model's label on the card: it is shown
    workspace.labels.prefer(base_run.run_id, chosen, str(run.at[chosen, "set_aside"]))
    again = pipeline.load_run(workspace).features.set_index("feature_id")
    assert (again.at[chosen, "label"], again.at[chosen, "label_note"]) == ("Field", "")


def test_themes_and_sub_themes_keep_a_name_the_models_scores_worse_than(workspace, base_run, fake):
    """A model that names every theme "group": a theme keeps its name where that scores worse, the summary says
    which and why; sub-themes are named with their themes, by the same rule."""
    fake.responder = lambda request: json.dumps({"label": "group", "description": "A group."})
    run = pipeline.load_run(workspace)
    before = {t["theme_id"]: t for t in workspace.groups.themes(base_run.run_id)}
    summary = label_scope(workspace, run, labeller(fake), LabelConfig(), LabelScope([], (), None))

    after = {t["theme_id"]: t for t in workspace.groups.themes(base_run.run_id)}
    aside = {kept.group_id: kept for kept in summary.themes.set_aside}
    assert aside, "“group” scores worse than most themes' keywords"
    for theme, row in after.items():
        if theme in aside:
            assert (row["label"], row["label_source"]) == (before[theme]["label"], before[theme]["label_source"])
            kept = aside[theme]
            assert kept.sentence().startswith(f"Theme {theme} keeps “{before[theme]['label']}” ({kept.kept_score:.2f})")
            assert f"the model's “group” scored {kept.score:.2f}" in kept.sentence()
        else:
            assert (row["label"], row["label_source"]) == ("group", "llama3.2")
    nested = subthemes_of(workspace, run, None)
    assert (summary.subthemes is not None) == bool(nested)
    if nested:
        subthemes = {s["subtheme_id"]: s for s in workspace.groups.subthemes(base_run.run_id)}
        kept = {k.group_id for k in summary.subthemes.set_aside}
        assert summary.subthemes.n_labelled == len(nested)
        for subtheme in nested:
            expected = "keywords" if subtheme in kept else "llama3.2"
            assert subthemes[subtheme]["label_source"] == expected
    again = label_groups(workspace, pipeline.load_run(workspace), "theme", labeller(fake))
    assert again.n_skipped == len(after) - len(aside)  # a theme that kept its name is asked again next time
