"""The report in Chromium, the network disabled: it shows the themes, the map and the group comparison's charts,
logs no console error, makes no request beyond its own file, and the hostile texts of its run (HTML, scripts, links
and formulas in the dataset name, document ids, titles and texts, a group's name and every label) stay text.
A screenshot goes to test-artifacts/report.png."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from hostile_run import HOSTILE, build_hostile_workspace
from playwright.sync_api import Browser, Page, expect

from bench import app_driver
from prisma_core.cli import main as cli_main
from prisma_core.reading.runs import load_run
from prisma_core.store import Workspace

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory, bbc: pd.DataFrame) -> tuple[Path, Workspace]:
    """The report of a run whose every user-supplied text is hostile, written by the command line."""
    workspace = Workspace(build_hostile_workspace(tmp_path_factory.mktemp("hostile"), bbc))
    out = tmp_path_factory.mktemp("report") / "report.html"
    assert cli_main(["report", "--workspace", str(workspace.path), "--out", str(out), "--level", "feature"]) == 0
    return out, workspace


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with app_driver.chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
def opened(browser: Browser, report: tuple[Path, Workspace]) -> Iterator[tuple[Page, list[str], list[str]]]:
    """The report opened offline: (page, every request made, every console error, page error or dialog)."""
    path, _ = report
    context = browser.new_context(offline=True)
    page = context.new_page()
    requests: list[str] = []
    problems: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("dialog", lambda dialog: (problems.append(f"dialog: {dialog.message}"), dialog.dismiss()))
    page.goto(path.as_uri(), wait_until="load")
    page.wait_for_timeout(1_000)  # anything delayed (a hostile onerror, a lazy load) would have happened by now
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
    yield page, requests, problems
    context.close()


def test_the_report_opens_offline_and_shows_the_themes_the_map_and_the_charts(opened, report):
    page, requests, problems = opened
    path, workspace = report
    run = load_run(workspace)
    expect(page.locator("h1")).to_have_text(f"Prisma report: {HOSTILE[0]} news")
    expect(page.locator("#themes .theme:not(.theme .theme)")).to_have_count(len(run.theme_info))  # sub-themes inside
    for theme in run.theme_info.itertuples():
        expect(page.locator("#themes .theme:not(.theme .theme) > h3").nth(int(theme.theme_id))).to_have_text(
            f"Theme {theme.theme_id}: {theme.label}"
        )
    expect(page.locator("#map svg circle")).to_have_count(run.codes.shape[0])  # 40 documents, all drawn
    assert page.locator("#map svg").bounding_box()["height"] > 300
    charts = page.locator("#groups svg")
    expect(charts).to_have_count(5)  # one chart a desk
    assert all(charts.nth(i).bounding_box()["width"] > 400 for i in range(5))
    assert charts.first.locator("circle").count() == 2 * 5  # in the group and elsewhere, for 5 features
    assert "could be chance" in page.inner_text("#groups") or "holds" in page.inner_text("#groups")
    assert requests in ([], [path.as_uri()])  # at most its own file: no script, style, font or picture fetched
    assert problems == []


def test_hostile_text_in_documents_and_labels_stays_text(opened):
    page, _, problems = opened
    assert page.locator("script, img, iframe, object, embed, a[href^=javascript]").count() == 0
    assert page.evaluate("document.querySelectorAll('[onerror], [onload], [onclick]').length") == 0
    text = page.evaluate("document.body.textContent")  # with the map's hover texts
    for markup in HOSTILE:
        assert markup in text  # shown as the characters it is made of
    expect(page.locator("#groups h3").filter(has_text=HOSTILE[1])).to_have_count(1)  # a group named with markup
    assert problems == []
