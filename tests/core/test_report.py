"""The report: one self-contained HTML file, written by `python -m prisma_core report` (and the app's download), on
the small real run (60 BBC articles, 12 per desk): what it shows, that it holds everything it needs, that every text
in it is escaped, and where it refuses to write."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from markupsafe import escape
from report_page import Page

from prisma_core.cli import main as cli_main
from prisma_core.compare.prevalence import group_comparison, summarise
from prisma_core.errors import NotFoundError, StoreError
from prisma_core.pipeline.report.config import ReportConfig
from prisma_core.pipeline.report.drawing import MAP_HEIGHT, MAP_WIDTH
from prisma_core.pipeline.report.writer import report_html, write_report
from prisma_core.reading.explore import level_units
from prisma_core.reading.overview import nested_subthemes
from prisma_core.reading.runs import load_run
from prisma_core.store import Workspace

RENAMED = 'Sport & athletics <desk> "quoted"'
MARKUP = "<script>alert('label')</script>"


@pytest.fixture(scope="module")
def workspace(small_run, tmp_path_factory) -> Workspace:
    """A copy of the small run where the analyst renamed a theme and an LLM gave a shown feature a label with markup."""
    workspace = small_run.copy(tmp_path_factory.mktemp("report") / "workspace")
    run_id = workspace.runs()[0].run_id
    themes = workspace.groups.themes(run_id)
    workspace.groups.save_themes(run_id, [t | {"label": RENAMED} if t["theme_id"] == 1 else t for t in themes])
    typical = int(themes[0]["features"][0])  # the most typical feature of theme 0: among its main concepts
    workspace.labels.add(run_id, [{"feature_id": typical, "label": MARKUP, "description": "", "source": "m"}])
    return workspace


@pytest.fixture(scope="module")
def written(workspace, tmp_path_factory) -> tuple[str, Page]:
    out = tmp_path_factory.mktemp("out") / "report.html"
    assert cli_main(["report", "--workspace", str(workspace.path), "--out", str(out), "--level", "feature"]) == 0
    page = out.read_text(encoding="utf-8")
    return page, Page(page)


def test_the_report_holds_everything_it_shows_and_fetches_nothing(written):
    page, parsed = written
    assert page.startswith("<!DOCTYPE html>")
    tags = {tag for tag, _ in parsed.tags}
    assert not tags & {"script", "link", "img", "iframe", "object", "embed", "audio", "video", "source", "base"}
    assert all(attrs.get("href", "#").startswith("#") for _, attrs in parsed.tags)  # only links within the page
    assert not [attrs for _, attrs in parsed.tags if "src" in attrs or any(k.startswith("on") for k in attrs)]
    assert "url(" not in page and "@import" not in page and "http://" not in page and "https://" not in page
    (policy,) = [a["content"] for a in parsed.named("meta") if a.get("http-equiv") == "Content-Security-Policy"]
    assert "default-src 'none'" in policy and "script-src" not in policy  # nothing may load, no script may run


def test_the_report_shows_the_collection_its_themes_as_named_and_the_map(written, workspace):
    page, parsed = written
    run = load_run(workspace)
    text = parsed.reads()
    assert "Documents 60" in text
    for theme in run.theme_info.itertuples():
        assert f"Theme {theme.theme_id}: {theme.label}" in text
    assert f"Theme 1: {RENAMED}" in text  # the name the analyst left, escaped in the file
    assert "Theme 1: Sport &amp; athletics &lt;desk&gt; &#34;quoted&#34;" in page
    typical = [a for a in parsed.named("div") if a.get("class") == "doc"]
    nested = nested_subthemes(run)["subtheme_id"].to_numpy()  # a theme's only sub-theme is not drawn inside it
    in_subthemes = sum(min(2, int(n)) for n in run.subthemes.sizes()[nested])  # two a sub-theme, in its theme's card
    assert len(typical) == len(run.theme_info) * 3 + in_subthemes  # three typical documents a theme
    for sub in run.subtheme_info.itertuples():
        assert (f"Sub-theme {sub.subtheme_id}: {sub.label}" in text) == (sub.subtheme_id in nested)
    assert "no theme well" in text or "Every document fits a theme well." in text  # "1 document ... fits no theme"
    (map_svg,) = [a for a in parsed.named("svg") if a.get("aria-label", "").startswith("Map of the documents")]
    assert map_svg["viewbox"] == f"0 0 {MAP_WIDTH} {MAP_HEIGHT}"
    circles = len(parsed.named("circle"))
    assert circles >= 60  # every document a dot (60 < the map's sample), then the comparison's dots


def test_the_report_compares_the_desks_with_their_statistics(written, workspace):
    _, parsed = written
    run = load_run(workspace)
    desks = workspace.metadata(run.record.dataset_id)["label"]
    text = parsed.reads()
    expected = summarise(group_comparison(level_units(run, "feature")[0], desks), 0.05)
    assert "Groups compared: label" in text and expected.sentence("feature") in text
    for desk in desks.unique():
        assert f"{desk} (12 documents)" in text
    assert "could be chance" in text and "95% range" in text
    assert "From their concepts alone" in text  # the concepts that predict the desks, on unseen documents


def test_the_report_names_the_settings_and_versions(written, workspace):
    _, parsed = written
    record = load_run(workspace).record
    text = parsed.reads()
    assert record.run_id in text and record.embedding_key in text and "How reliable the concepts are" in text
    found_in_all, kept, compared = (record.metrics[key] for key in ("found_in_all", "features_kept", "n_trainings"))
    assert f"Features found in every training {found_in_all} of {kept} ({compared} trainings)" in text
    for package, version in record.versions.items():
        assert f"{package} {version}" in text


def test_every_label_and_text_is_escaped(written):
    page, parsed = written
    assert MARKUP not in page
    assert str(escape(MARKUP)) in page  # as Jinja escapes it: &lt;script&gt;alert(&#39;label&#39;)...
    assert MARKUP in parsed.reads()  # shown as the text it is


def test_the_map_the_caller_has_is_the_one_drawn(workspace):
    run = load_run(workspace)
    points = pd.DataFrame({"position": np.arange(10), "x": np.arange(10.0), "y": np.arange(10.0) ** 2})
    parsed = Page(report_html(workspace, run, ReportConfig(predict=False), points))
    text = parsed.reads()
    assert "A random sample of 10 of 60 documents is drawn." in text
    themes, _ = level_units(run, "theme")
    n_groups, n_shown = 5, min(5, themes.shape[1])
    assert len(parsed.named("circle")) == 10 + n_groups * n_shown * 2  # 10 dots, then two per concept and group
    assert "From their concepts alone" not in text


def test_where_the_report_refuses_to_write(workspace, tmp_path):
    run = load_run(workspace)
    with pytest.raises(StoreError, match="inside the workspace"):
        write_report(workspace, run, workspace.path / "runs" / "report.html")
    with pytest.raises(StoreError, match="is a folder"):
        write_report(workspace, run, tmp_path)
    with pytest.raises(NotFoundError, match=r"no column “desk” .*its columns: label"):
        write_report(workspace, run, tmp_path / "report.html", ReportConfig(column="desk"))
    assert not (tmp_path / "report.html").exists() and list(Path(tmp_path).iterdir()) == []


def test_a_document_typical_of_two_themes_is_shown_in_both(workspace):
    run = load_run(workspace)
    run = replace(run, themes=replace(run.themes, member_share=0.05))  # a second theme from 5% of a document's vote
    members = run.themes.members()
    assert (np.diff(members.indptr) > 1).any()  # some articles belong to two themes
    points = pd.DataFrame({"position": [0], "x": [0.0], "y": [0.0]})
    parsed = Page(report_html(workspace, run, ReportConfig(typical_documents=20, predict=False), points))
    typical = [a for a in parsed.named("div") if a.get("class") == "doc"]
    nested = nested_subthemes(run)["subtheme_id"].to_numpy()  # a theme's only sub-theme is not drawn inside it
    in_subthemes = sum(min(2, int(n)) for n in run.subthemes.sizes()[nested])
    assert len(typical) == sum(min(20, int(n)) for n in np.asarray(members.sum(axis=0)).ravel()) + in_subthemes
