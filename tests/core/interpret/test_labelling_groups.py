"""Families and themes named from their members' labels and the documents where they are strongest, and a
scope labelled level by level.
"""

import json
from dataclasses import asdict

import numpy as np
import pandas as pd
import scipy.sparse as sp
from labelling_run import active_features, labeller, llm_rows, named_by_score, ollama, prefix, shown_documents

from prisma_core import pipeline
from prisma_core.concepts.families import FamilyConfig
from prisma_core.interpret.keywords import KEYWORD_SOURCE
from prisma_core.pipeline.labelling import (
    LabelConfig,
    LabelScope,
    group_documents,
    label_groups,
    label_run,
    label_scope,
    plan_labels,
)
from prisma_core.pipeline.labelling.planning import subthemes_of
from prisma_core.progress import Progress
from prisma_core.reading.runs import resolve_labels


def fake_answer(headline: str) -> str:
    """What the loopback Ollama names a group whose prompt is headlined by `headline` (tests/helpers/ollama_server)."""
    return " ".join([*headline.replace(" · ", " ").split()[:6], "family"])


def fake_group_label(family, workspace, run_id: str) -> str:
    shown = resolve_labels(workspace.labels.of(run_id)).set_index("feature_id")["label"]
    return fake_answer(shown[family.parent])


def rows(families) -> list[dict]:
    return [asdict(family) for family in families]


def test_family_labels_come_from_member_labels_fall_back_to_keywords_and_are_exported(
    workspace, base_run, fake, tmp_path
):
    families = workspace.groups.families(base_run.run_id)
    first, second = families[0], families[1]
    label_run(workspace, pipeline.load_run(workspace), labeller(fake), feature_ids=[second.parent])
    (model_label,) = llm_rows(workspace, base_run.run_id)["label"]
    parent = resolve_labels(workspace.labels.of(base_run.run_id)).set_index("feature_id").loc[second.parent]
    parent_label, parent_source = parent["label"], parent["label_source"]  # what the family's prompt shows
    assert (parent_label, parent_source) == (model_label, "llama3.2") or (
        parent_source == KEYWORD_SOURCE and parent["set_aside"] is not None  # the model's label scored worse
    )
    fake.requests.clear()
    fake.scripted.extend(["no JSON here"] * 3)  # every attempt for the first family
    done: list[Progress] = []

    summary = label_groups(
        workspace,
        pipeline.load_run(workspace),
        "family",
        labeller(fake),
        progress=done.append,
        should_stop=lambda: len(done) > 5,
    )

    assert (summary.n_labelled, summary.n_failed, summary.n_remaining) == (4, 1, len(families) - 5)
    assert summary.first_error.startswith(f"Family {first.family_id}: The model 'llama3.2' gave no usable")
    stored = workspace.groups.families(base_run.run_id)
    assert (stored[0].label, stored[0].label_source) == (first.label, KEYWORD_SOURCE)
    made = {f.family_id: fake_group_label(f, workspace, base_run.run_id) for f in families[1:5]}
    assert made[second.family_id] == fake_answer(parent_label)
    named_by_score(rows(families), rows(stored), "family_id", summary, made)
    assert [f.label_source for f in stored[5:]] == [KEYWORD_SOURCE] * (len(families) - 5)
    assert [(f.members, f.edges) for f in stored] == [(f.members, f.edges) for f in families]
    prompt = fake.user_prompts()[3]
    assert f"<parent>\n<label>{parent_label}</label>\n</parent>" in prompt

    pipeline.export_run(workspace, None, tmp_path / "export")
    exported = json.loads((tmp_path / "export" / "families.json").read_text())
    assert [(f["label"], f["label_source"]) for f in exported[:2]] == [(f.label, f.label_source) for f in stored[:2]]
    features = pd.read_parquet(tmp_path / "export" / "features.parquet").set_index("feature_id")
    assert features.loc[second.parent, ["label", "label_source"]].tolist() == [parent_label, parent_source]
    assert {"label_source", "score_embedding", "score_detection"} <= set(features.columns)

    fake.requests.clear()
    rerun = label_groups(
        workspace, pipeline.load_run(workspace), "family", labeller(fake), should_stop=lambda: len(fake.requests) >= 1
    )
    assert rerun.n_skipped == 4 - len(summary.set_aside) and len(fake.requests) == 1  # set aside: asked again


def test_theme_labels_come_from_their_most_typical_features_through_the_same_path(workspace, base_run, fake, tmp_path):
    themes = workspace.groups.themes(base_run.run_id)
    assert len(themes) >= 2
    shown = pipeline.resolve_labels(workspace.labels.of(base_run.run_id)).set_index("feature_id")["label"]
    run = pipeline.load_run(workspace, base_run.run_id)
    assert plan_labels(workspace, run, ollama(fake), feature_ids=[], theme_ids=None).n_themes == len(themes)

    summary = label_groups(workspace, pipeline.load_run(workspace), "theme", labeller(fake))

    assert (summary.n_labelled, summary.n_failed, summary.n_remaining) == (len(themes), 0, 0)
    stored = workspace.groups.themes(base_run.run_id)
    # the headline of each prompt: the theme's most typical feature
    made = {int(t["theme_id"]): fake_answer(shown[t["features"][0]]) for t in themes}
    named_by_score(themes, stored, "theme_id", summary, made)
    for before, after in zip(themes, stored, strict=True):
        assert after["features"] == before["features"]
        np.testing.assert_array_equal(after["evidence"], before["evidence"])
    prompt = fake.user_prompts()[0]
    assert "Name what this theme is about." in prompt
    assert "a broad subject that many concepts share" in fake.requests[0]["messages"][0]["content"]

    fake.requests.clear()
    again = label_groups(workspace, pipeline.load_run(workspace), "theme", labeller(fake))
    set_aside = len(summary.set_aside)
    assert again.n_skipped == len(themes) - set_aside and len(fake.requests) == set_aside  # set aside: asked again
    pipeline.export_run(workspace, None, tmp_path / "export")
    exported = json.loads((tmp_path / "export" / "themes.json").read_text())
    stored = {t["theme_id"]: t for t in workspace.groups.themes(base_run.run_id)}
    assert [(t["label"], t["label_source"]) for t in exported] == [
        (stored[t["theme_id"]]["label"], stored[t["theme_id"]]["label_source"]) for t in exported
    ]


def test_a_theme_without_a_feature_of_its_own_is_not_asked_about_and_keeps_its_name(workspace, base_run, fake):
    """Each of a theme's features may fit another theme better: the theme is left with nothing to be named from."""
    themes = workspace.groups.themes(base_run.run_id)
    bare = int(themes[-1]["theme_id"])
    workspace.groups.save_themes(
        base_run.run_id, [t | {"features": []} if t["theme_id"] == bare else t for t in themes]
    )
    run = pipeline.load_run(workspace, base_run.run_id)
    assert plan_labels(workspace, run, ollama(fake), feature_ids=[], theme_ids=None).n_themes == len(themes) - 1

    summary = label_groups(workspace, run, "theme", labeller(fake))

    assert (summary.n_labelled, summary.n_inactive, summary.n_skipped, summary.n_failed) == (len(themes) - 1, 1, 0, 0)
    assert len(fake.requests) == len(themes) - 1
    kept = next(t for t in workspace.groups.themes(base_run.run_id) if t["theme_id"] == bare)
    assert (kept["label"], kept["label_source"]) == (themes[-1]["label"], KEYWORD_SOURCE)
    assert summary.not_asked("themes") == "1 without a feature of its own to be named from (keyword name kept)"


def test_a_scope_is_labelled_features_first_and_no_level_starts_after_one_stopped(workspace, base_run, fake):
    """The job the Labels page and `label` run: the scope's features, then its families, then its themes."""
    features = active_features(workspace, base_run.run_id, 2)
    n_themes = len(workspace.groups.themes(base_run.run_id))
    stages: list[str] = []

    summary = label_scope(
        workspace,
        pipeline.load_run(workspace),
        labeller(fake),
        LabelConfig(),
        LabelScope(features, (), None),
        progress=lambda event: stages.append(event.stage),
    )

    nested = subthemes_of(workspace, pipeline.load_run(workspace), None)  # named with their themes
    levels = ["features", "themes", *(["sub-themes"] if nested else [])]
    assert [level for level, _ in summary.levels()] == levels and summary.families is None
    assert (summary.features.n_labelled, summary.themes.n_labelled, summary.stop_reason) == (2, n_themes, "")
    assert summary.subthemes is None or summary.subthemes.n_labelled == len(nested)
    assert list(dict.fromkeys(stages)) == ["label", "theme labels", *(["sub-theme labels"] if nested else [])]
    cancelled = label_scope(
        workspace,
        pipeline.load_run(workspace),
        labeller(fake),
        LabelConfig(relabel=True),
        LabelScope(None, None, None),
        should_stop=lambda: True,
    )
    assert cancelled.stop_reason == cancelled.features.stop_reason
    assert cancelled.stop_reason.startswith("Cancelled after 0 of")
    assert [level for level, _ in cancelled.levels()] == ["features"]


def test_a_family_is_named_from_member_labels_and_the_documents_where_it_is_strongest(workspace, base_run, fake):
    run = pipeline.load_run(workspace, base_run.run_id)
    family = max(run.families, key=lambda f: len(f.members))
    codes = sp.csc_matrix(run.codes)
    evidence, contrast = group_documents(codes, family.members, 8, 8, seed=0)
    summed = np.asarray(codes[:, family.members].sum(axis=1)).ravel()
    assert summed[evidence].min() >= np.sort(summed)[-len(evidence)] and (summed[contrast] == 0).all()

    summary = label_groups(
        workspace, pipeline.load_run(workspace), "family", labeller(fake), group_ids=[family.family_id]
    )

    assert summary.n_labelled == 1 and summary.n_skipped == 0
    prompt = fake.user_prompts()[0]
    assert shown_documents(prompt, "evidence") == {prefix(base_run.corpus["text"][p]) for p in evidence}
    assert shown_documents(prompt, "contrast") == {prefix(base_run.corpus["text"][p]) for p in contrast}
    others = [f for f in workspace.groups.families(base_run.run_id) if f.family_id != family.family_id]
    assert {f.label_source for f in others} == {KEYWORD_SOURCE}


def test_family_labels_are_not_written_over_families_rebuilt_meanwhile(workspace, base_run, fake):
    families = workspace.groups.families(base_run.run_id)

    def rebuild_during_the_batch(event: Progress) -> None:
        if event.done == 1:
            pipeline.rebuild_families(workspace, base_run.run_id, FamilyConfig(tau=0.3))

    label_groups(workspace, pipeline.load_run(workspace), "family", labeller(fake), progress=rebuild_during_the_batch)

    rebuilt = workspace.groups.families(base_run.run_id)
    old_members = {f.family_id: f.members for f in families}
    for family in rebuilt:
        if family.label_source != KEYWORD_SOURCE:
            assert old_members.get(family.family_id) == family.members
