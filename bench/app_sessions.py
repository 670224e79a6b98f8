"""What the app memory benchmarks do in the browser: a fresh server of the app with its memory sampled, the
one-click demo, and a session that uploads a CSV of real documents, embeds, trains and visits the pages."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd
from playwright.sync_api import Browser, Locator, Page, expect

from bench import common
from bench.app_driver import PAGE_MS, go, open_expander, settle, streamlit_server
from bench.memory_sampler import TreeSampler

DEMO_DOCS, QUICK_DEMO_DOCS = 400, 80
UPLOAD_DOCS, QUICK_UPLOAD_DOCS = 2000, 200
LONG_WORK_MS = 10_800_000  # three hours: on the shared 2-core machine at load 20 the 400-note demo took over 30 minutes
FIRST_RUN_MS = 300_000  # a fresh server's first run imports torch and the app: slow on a shared CPU
UPLOAD_PAGES = ["Home", "Features", "Families", "Labels", "Explore", "Glossary", "Datasets", "Embeddings", "Train SAE"]
EXPLORE_TABS = ["Search", "Concept query", "Compare groups", "Map", "Downloads"]


def scenario(
    browser: Browser, scratch: Path, name: str, drive, app_dir: Path = common.REPO, **env: str
) -> dict[str, Any]:
    """Run `drive(page, sampler)` against a fresh server of the app in `app_dir`; the memory report of its process
    tree."""
    workspace = scratch / f"{name}_workspace"
    with streamlit_server(workspace, scratch / f"{name}.log", app_dir=app_dir, **env) as (url, process):
        sampler = TreeSampler(process.pid)
        with sampler.running():
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            with sampler.during("first page"):
                page.goto(url)
                page.get_by_role("heading", name="Prisma", exact=True).wait_for(timeout=FIRST_RUN_MS)
                settle(page)
            try:
                drive(page, sampler)
            except Exception:
                keep_evidence(page, scratch / f"{name}.log", name)
                raise
            page.close()
            return sampler.report() | {"notes": sampler.notes}


EVIDENCE = common.RESULTS_DIR / "failed"


def keep_evidence(page: Page, log: Path, name: str) -> None:
    """What the page showed when a scenario failed, and the server's log, kept in bench/results/failed/ (the
    scenario's own folder is removed)."""
    EVIDENCE.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(EVIDENCE / f"{name}.png"), full_page=True)
    (EVIDENCE / f"{name}.log").write_text(log.read_text() if log.exists() else "")


def demo_session(page: Page, sampler: TreeSampler) -> None:
    with sampler.during("demo (embed, train, labels, families)"):
        page.get_by_role("button", name="Run with defaults").click()
        expect(page.get_by_role("heading", name="Features", exact=True)).to_be_visible(timeout=LONG_WORK_MS)
        settle(page)
    for title in ["Families", "Explore"]:
        with sampler.during(title):
            go(page, title)
            if title == "Families":
                page.frame_locator("iframe[title='streamlit_agraph.agraph']").locator("canvas").first.wait_for(
                    timeout=PAGE_MS
                )


def upload_csv(path: Path, n_docs: int) -> Path:
    """n_docs real documents, half AG News and half BBC articles, as a CSV (text, category) at path."""
    corpora = common.CORPORA_DIR
    half = n_docs // 2
    ag_news = pd.read_parquet(corpora / "ag_news_test.parquet").sample(n_docs - half, random_state=0)
    bbc = pd.read_parquet(corpora / "bbc_news.parquet").sample(half, random_state=0)
    frame = pd.concat([ag_news, bbc])[["id", "text", "label"]].rename(columns={"label": "category"})
    frame.to_csv(path, index=False)
    return path


def upload_session(page: Page, sampler: TreeSampler, csv: Path, n_docs: int, pages: list[str] = UPLOAD_PAGES) -> None:
    with sampler.during("upload and create the dataset"):
        go(page, "Datasets")
        page.get_by_role("region", name="Files", exact=True).get_by_test_id(
            "stFileUploaderDropzoneInput"
        ).set_input_files(csv)
        expect(page.get_by_text("Preview (first 20 rows)")).to_be_visible(timeout=PAGE_MS)
        settle(page)
        page.get_by_role("button", name="Create dataset").click()
        expect(page.get_by_text(f"{n_docs:,} documents from 1 file(s).")).to_be_visible(timeout=PAGE_MS)
        settle(page)
    with sampler.during("embed"):
        go(page, "Embeddings")
        page.get_by_role("button", name=f"Embed {n_docs:,} documents").click()
        done = page.get_by_text("is embedded with this model: you can train an SAE.")
        expect(done).to_be_visible(timeout=LONG_WORK_MS)
        settle(page)
    with sampler.during("train (suggested settings, keyword labels, families)"):
        go(page, "Train SAE")
        page.get_by_role("button", name="Train", exact=True).click()
        expect(page.get_by_role("heading", name="Runs on this dataset")).to_be_visible(timeout=LONG_WORK_MS)
        settle(page)
    for title in pages:
        with sampler.during(title):
            go(page, title)
            if title == "Explore":
                for tab in EXPLORE_TABS:
                    page.get_by_role("tab", name=tab).click()
                    settle(page)


EDIT_LEVELS = {"theme": "Theme", "subtheme": "Sub-theme", "family": "Family", "feature": "Feature"}
EDIT_ACTIONS = {
    "rename": "Rename",
    "hide": "Hide",
    "pin": "Pin to the top",
    "merge": "Merge other themes into it",
    "split": "Split it into its sub-themes",
}


def edits_panel(page: Page) -> Locator:
    """The Features page's *Your edits* panel, opened when it is folded."""
    return open_expander(page, "Your edits")


def choose_option(page: Page, combobox: Locator, option: int | str) -> str:
    """Opens a select box and clicks its option at that index, or the option named so; returns the option's text."""
    combobox.scroll_into_view_if_needed()
    combobox.click()
    named = page.get_by_role("option", name=option, exact=True) if isinstance(option, str) else None
    chosen = named.first if named is not None else page.get_by_role("option").nth(int(option))
    chosen.wait_for(timeout=PAGE_MS)
    text = chosen.inner_text()
    chosen.click()
    settle(page)
    return text


def make_edit(
    page: Page, level: str, action: str, concept: int | str = 0, name: str = "", merged: int | str = 0
) -> str:
    """One edit made on the Features page's *Your edits* panel, as an analyst makes it: the level, the concept (the
    option at that index of the picker, or the option named so), the change (a rename's `name`; a merge takes the
    `merged` theme, an index or a name among the others offered); returns the concept's name as the picker showed
    it."""
    panel = edits_panel(page)
    panel.get_by_test_id("stRadio").filter(has_text="Level").get_by_text(EDIT_LEVELS[level], exact=True).click()
    settle(page)
    panel = edits_panel(page)
    picked = choose_option(page, panel.locator(".st-key-edit_target [role=combobox]"), concept)
    panel = edits_panel(page)
    panel.get_by_test_id("stRadio").filter(has_text="Change").get_by_text(EDIT_ACTIONS[action], exact=True).click()
    settle(page)
    panel = edits_panel(page)
    if action == "rename":
        panel.get_by_label("New name", exact=True).fill(name)
    if action == "merge":
        choose_option(page, panel.get_by_test_id("stMultiSelect").locator("[role=combobox]"), merged)
        page.keyboard.press("Escape")
    panel.get_by_role("button", name="Save the change").click()
    settle(page)
    return picked


def train_again(page: Page) -> None:
    """Train SAE with the settings shown (the run's dataset trained again), until the job is over."""
    go(page, "Train SAE")
    page.get_by_role("button", name="Train", exact=True).click()
    running = page.get_by_text(re.compile(r"Training on “.*”: running"))
    expect(running).to_be_visible(timeout=PAGE_MS)
    expect(running).to_have_count(0, timeout=LONG_WORK_MS)
    settle(page)
