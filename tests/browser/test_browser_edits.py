"""Issue 45's walk in Chromium: an edit of each kind (rename, merge, split, hide, pin) made on the Features page's
*Your edits* panel, then a group comparison at the features level, the export and the report, each checked against
the run as the core reads it (no concept left out is named or counted, every name is its own concept's); then the
themes regrouped by the command line while the app is open, and an edit that no longer applies made again from
Home in one click. Along the way: the panel stays open after each edit, its pickers show names without
backslashes, the tab's icon comes from no server (nothing is fetched beyond the app), and the family graph logs no
"Unknown option" error. Screenshots go to test-artifacts/."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from html import unescape
from urllib.parse import urlparse

import pandas as pd
import pytest
from playwright.sync_api import Browser, Page, expect
from reliability_helpers import run_cli
from test_browser import LONG_WORK_MS, assert_clean, assert_clean_log, download, graph_frame, shoot, streamlit_server

from bench import app_driver
from bench.app_driver import PAGE_MS, go, settle
from bench.app_sessions import edits_panel, make_edit
from prisma_core import pipeline
from prisma_core.compare.prevalence import group_comparison
from prisma_core.names import feature_name, unit_name
from prisma_core.reading.explore import level_units, named_units
from prisma_core.reading.runs import load_run
from prisma_core.run_shape.loaded_run import LoadedRun
from prisma_core.sae import SAEConfig
from prisma_core.store import Workspace

WALK_SAE = SAEConfig(n_features=48, k=4, epochs=10, n_trainings=1)
RENAMED = "Astrophysics <i>mine</i>"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with app_driver.chromium() as launched:
        yield launched


def option_names(page: Page) -> list[str]:
    """The texts of the Your edits panel's concept picker, opened and closed again."""
    panel = edits_panel(page)
    panel.locator(".st-key-edit_target [role=combobox]").click()
    options = page.get_by_role("option")
    options.first.wait_for(timeout=PAGE_MS)
    names = options.all_inner_texts()
    page.keyboard.press("Escape")
    return names


def panel_is_open(page: Page) -> bool:
    return (
        page.get_by_test_id("stExpander").filter(has_text="Your edits").locator("details").get_attribute("open")
        is not None
    )


def edit_and_check_the_panel(
    page: Page, level: str, action: str, concept: str, name: str = "", merged: str = ""
) -> None:
    make_edit(page, level, action, concept, name, merged or 0)
    assert_clean(page)
    assert panel_is_open(page), f"the panel folded shut after {action}"


def theme_option(workspace: Workspace, theme: int) -> str:
    info = load_run(workspace).theme_info.set_index("theme_id")
    return unit_name("theme", theme, info.at[theme, "label"])


def test_every_kind_of_edit_then_a_comparison_the_export_and_the_report(browser, bbc_openings, tmp_path):
    workspace = bbc_openings.copy(tmp_path / "workspace")
    run_id = pipeline.train_run(workspace, bbc_openings.dataset_id, WALK_SAE).run_id
    trained = load_run(workspace)
    themes = trained.theme_info["theme_id"].astype(int).tolist()
    per_theme = trained.subtheme_info["theme_id"].value_counts()
    split = int(per_theme[per_theme >= 2].index[0])
    others = [t for t in themes if t != split]
    assert len(others) >= 3, "the 300 openings of five desks make four themes or more"
    renamed, merged_into, merged = others[:3]
    firing = trained.features.loc[trained.features["density"] > 0, "feature_id"].astype(int).tolist()
    hidden = firing[1]  # not the last feature: hiding it moves every column after it

    with streamlit_server(workspace.path, "edits.log") as (url, _):
        context = browser.new_context(viewport={"width": 1400, "height": 1600})
        page = context.new_page()
        requests: list[str] = []
        console: list[str] = []
        page.on("request", lambda request: requests.append(request.url))
        page.on("console", lambda message: console.append(message.text))
        page.goto(url)
        settle(page)
        page.goto(f"{url}/features")
        expect(page.get_by_role("heading", name="Features", exact=True)).to_be_visible(timeout=LONG_WORK_MS)
        settle(page)

        assert all("\\" not in name for name in option_names(page))  # "Theme 0\: …" before
        edit_and_check_the_panel(page, "theme", "rename", theme_option(workspace, renamed), RENAMED)
        edit_and_check_the_panel(
            page, "theme", "merge", theme_option(workspace, merged_into), merged=theme_option(workspace, merged)
        )
        edit_and_check_the_panel(page, "theme", "split", theme_option(workspace, split))
        label = load_run(workspace).features.set_index("feature_id").at[hidden, "label"]
        edit_and_check_the_panel(page, "feature", "hide", unit_name("feature", hidden, label))
        family = load_run(workspace).families[-1]  # a family still shown once the feature is hidden
        edit_and_check_the_panel(page, "family", "pin", unit_name("family", family.family_id, family.label))
        edited = load_run(workspace)
        assert [e.action for e in edited.edited.applied] == ["rename", "merge", "split", "hide", "pin"]
        shoot(page, "45_edits")

        compared = compare_features(page, workspace, edited)
        gone = feature_name(hidden, label)
        assert gone not in set(compared["concept"])

        go(page, "Explore")
        page.get_by_role("tab", name="Downloads").click()
        settle(page)
        exported = pd.read_csv(download(page, "Labels (CSV)"))
        shown = edited.features[~edited.features["hidden"]]
        assert hidden not in exported["feature_id"].tolist()
        assert exported.set_index("feature_id")["label"].to_dict() == shown.set_index("feature_id")["label"].to_dict()
        themes_json = json.loads(download(page, "Themes (JSON)").read_text())
        assert [t["theme_id"] for t in themes_json] == edited.theme_info["theme_id"].tolist()
        check_report(download(page, "Report (HTML, one file to share)").read_text(), edited, gone)
        shoot(page, "45_downloads")

        go(page, "Families")
        graph_frame(page)
        page.wait_for_timeout(1500)
        assert not [line for line in console if "Unknown option" in line], console

        regroup_and_reapply(page, workspace, run_id)
        assert_clean(page)
        favicon = page.evaluate("document.querySelector(\"link[rel='shortcut icon']\").href")
        assert favicon.startswith("data:")  # drawn by the browser, fetched from no font server
        assert {urlparse(request).hostname for request in requests} <= {"127.0.0.1"}, requests
        context.close()
    assert_clean_log("edits.log")


def compare_features(page: Page, workspace: Workspace, edited: LoadedRun) -> pd.DataFrame:
    """Explore -> Compare groups at the features level: the page draws its table and chart, and its CSV holds every
    comparison the core makes, each named as its own feature with that feature's counts."""
    go(page, "Explore")
    page.get_by_role("tab", name="Compare groups").click()
    settle(page)
    page.get_by_test_id("stRadio").filter(has_text="Work with").get_by_text("Features", exact=True).click()
    settle(page)
    expect(page.get_by_text("What sets each group apart", exact=False)).to_be_visible(timeout=PAGE_MS)
    assert_clean(page)
    assert page.get_by_text("could not show this page").count() == 0
    page.locator("[data-testid=stVegaLiteChart]").first.wait_for(timeout=PAGE_MS)
    shoot(page, "45_compare_features")
    saved = pd.read_csv(download(page, "Every comparison with its statistics"))
    codes, units = level_units(edited, "feature")
    groups = workspace.metadata(edited.record.dataset_id)["label"]
    expected = named_units(group_comparison(codes, groups), "feature", units)
    assert len(saved) == len(expected) and "None" not in set(saved["concept"].astype(str))
    counts = saved.set_index(["group", "concept"])["n_documents"].to_dict()
    assert counts == expected.set_index(["group", "concept"])["n_documents"].to_dict()
    return saved


def check_report(page_html: str, edited: LoadedRun, gone: str) -> None:
    """The report counts the themes and features shown, names the renamed theme, and never the hidden feature."""
    text = unescape(re.sub(r"<[^>]+>", " ", page_html))
    words = " ".join(text.split())
    shown = edited.features[~edited.features["hidden"]]
    assert f"Themes {len(edited.theme_info)} " in words
    assert f"in use {int((shown['density'] > 0).sum())} of {len(shown)} " in words
    assert RENAMED in text and f"{gone} " not in words and f"{gone}<" not in page_html


def regroup_and_reapply(page: Page, workspace: Workspace, run_id: str) -> None:
    """The command line regroups the themes while the app is open: every edit that no longer applies is announced on
    Home; the first is made again in one click and its notice goes."""
    done = run_cli("themes", "--run", run_id, "--n-themes", "2", workspace=workspace.path)
    assert done.returncode == 0, done.stderr
    go(page, "Home")
    page.reload()
    settle(page)
    lost = load_run(workspace).edited.not_applied
    notices = page.locator("[data-testid=stAlertContentWarning]").filter(has_text="does not show")
    expect(notices).to_have_count(len(lost), timeout=PAGE_MS)
    shoot(page, "45_home_notices")
    if not lost:
        return
    first = lost[0]
    apply = page.locator(f".st-key-home_notice_{first.edit_id}").get_by_role("button", name=re.compile("^Apply it to"))
    if apply.count():
        apply.click()
        settle(page)
        assert first.edit_id not in {e.edit_id for e in load_run(workspace).edited.not_applied}
        expect(notices).to_have_count(len(lost) - 1, timeout=PAGE_MS)
