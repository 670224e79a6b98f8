"""The analyst's walk of issue 26 in a real browser: `streamlit run app.py` in headless Debian Chromium, the
loopback Ollama for labels, another process (the command line) changing the run. Every click is made once and its
effect asserted: a click the app dropped fails the test instead of being retried.

- /Features and /train-sae open their pages on a running server (no "Page not found");
- a category column chosen as the text is warned about before the dataset is created;
- while a model trains, the Features page says so, and the job's status turns (a spinner, never a check mark);
- the family graph's default view draws every label at a readable size (measured on the canvas);
- labelling starts small (the 20 most common features), shows a spinner while it runs and a check mark when done;
- themes regrouped by the command line show after a reload;
- the glossary names Theme and keeps τ (tau) and k as written.
Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from ollama_server import FakeOllama, running_fake_ollama
from playwright.sync_api import Browser, Page, expect
from reliability_helpers import run_cli
from test_browser import (
    ARTIFACTS,
    LONG_WORK_MS,
    assert_clean,
    assert_clean_log,
    graph_frame,
    open_options,
    set_number,
    shoot,
    streamlit_server,
)

from bench import app_driver
from bench.app_driver import PAGE_MS, go, open_expander, settle
from prisma_core.sae.config import MAX_EPOCHS
from prisma_core.store import Workspace

N_DOCUMENTS = 120
READABLE_PX = 12
"""The smallest label size on screen a person reads without zooming."""
RECORD_CANVAS_TEXT = """(() => {
  const fillText = CanvasRenderingContext2D.prototype.fillText;
  window.__canvasText = [];
  window.__lastDrawn = 0;
  CanvasRenderingContext2D.prototype.fillText = function (text, ...rest) {
    window.__lastDrawn = performance.now();
    const size = /([0-9.]+)px/.exec(this.font);
    const t = this.getTransform();
    const scale = Math.hypot(t.a, t.b) / (window.devicePixelRatio || 1);
    window.__canvasText.push([String(text), size ? parseFloat(size[1]) * scale : 0]);
    return fillText.call(this, text, ...rest);
  };
})();"""
"""Records every text a canvas draws with its size on screen in CSS pixels (font size times the canvas transform):
what a person sees of the family graph's labels, which vis.js draws on a canvas; and when it last drew one."""
DRAWN_AND_STILL = "() => window.__canvasText.length > 0 && performance.now() - window.__lastDrawn > 500"
"""The graph has drawn its labels and drawn nothing for half a second: vis.js redraws every frame while its layout
moves, so its layout has settled."""
SPINNER = "[data-testid=stExpanderIconSpinner]"
CHECK_MARK = "[data-testid=stExpanderIconCheck]"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOllama]:
    with running_fake_ollama() as server:
        yield server


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with app_driver.chromium() as launched:
        yield launched


def choose(page: Page, picker: str, option: str) -> None:
    """Pick an option of a select box (one click to open it, one on the option)."""
    open_options(page, page.locator(f".st-key-{picker} [role=combobox]"))
    page.get_by_role("option", name=option, exact=True).click()
    settle(page)


def graph_labels(page: Page) -> dict[str, float]:
    """Each text the family graph drew last, with its size on screen in pixels, once its layout has settled."""
    frame = graph_frame(page)
    frame.wait_for_function(DRAWN_AND_STILL, timeout=PAGE_MS)
    return dict(frame.evaluate("window.__canvasText"))


def upload_and_check_the_text_column(page: Page, csv: Path) -> None:
    go(page, "Datasets")
    page.get_by_role("region", name="Files", exact=True).get_by_test_id("stFileUploaderDropzoneInput").set_input_files(
        csv
    )
    expect(page.get_by_text("Preview (first 20 rows)")).to_be_visible(timeout=PAGE_MS)
    settle(page)
    warning = page.get_by_text("looks like a category, not text")
    expect(warning).to_have_count(0)
    choose(page, "text_column", "category")
    expect(warning).to_be_visible()
    shoot(page, "26_category_as_text")
    choose(page, "text_column", "text")
    expect(warning).to_have_count(0)
    page.get_by_role("button", name="Create dataset").click()
    expect(page.get_by_text(f"{N_DOCUMENTS} documents from 1 file(s).")).to_be_visible(timeout=PAGE_MS)
    settle(page)


def train_while_watching_features(page: Page) -> None:
    """A long training: Features says it runs, its status turns; cancelled; then a short one that finishes."""
    go(page, "Train SAE")
    set_number(page, "Features", 32)
    open_expander(page, "Advanced settings")  # the technical settings wait there
    set_number(page, "k (active features per document)", 4)
    set_number(page, "Epochs", MAX_EPOCHS)  # the most allowed: seven trainings of 1,000 epochs run long
    page.get_by_role("button", name="Train", exact=True).click()
    expect(page.get_by_text("Training on “bbc_walk”: running")).to_be_visible(timeout=PAGE_MS)
    go(page, "Features")
    expect(page.get_by_text("A model is being trained on “bbc_walk” right now")).to_be_visible()
    expect(page.locator(SPINNER)).to_be_visible()
    expect(page.locator(CHECK_MARK)).to_have_count(0)  # a running job never reads as finished
    assert page.get_by_text("has no trained SAE yet").count() == 0
    shoot(page, "26_features_while_training")
    go(page, "Train SAE")
    page.get_by_role("button", name="Cancel").click()
    expect(page.get_by_text("Training on “bbc_walk”: cancelled.")).to_be_visible(timeout=LONG_WORK_MS)
    settle(page)
    open_expander(page, "Advanced settings")
    set_number(page, "Epochs", 10)
    page.get_by_role("button", name="Train", exact=True).click()
    expect(page.get_by_role("heading", name="Runs on this dataset")).to_be_visible(timeout=LONG_WORK_MS)
    settle(page)


def label_the_most_common_features(page: Page, fake: FakeOllama) -> None:
    go(page, "Labels")
    host = page.get_by_label("Ollama server", exact=True)
    host.fill(fake.url)
    host.press("Enter")
    settle(page)
    expect(page.get_by_role("radio", name=re.compile(r"The \d+ most common features"))).to_be_checked()
    expect(page.get_by_text(re.compile(r"\d+ requests?"))).to_be_visible()  # at most 20: as many as the run has
    fake.delay_s = 0.5  # long enough to see the job run
    page.get_by_role("button", name="Start").click()
    running = re.compile(r"Labelling the \d* ?most common features with llama3.2:latest: running")
    expect(page.get_by_text(running)).to_be_visible(timeout=PAGE_MS)
    expect(page.locator(SPINNER)).to_be_visible()
    expect(page.locator(CHECK_MARK)).to_have_count(0)
    shoot(page, "26_labels_running")
    fake.delay_s = 0.0  # seen running: the rest at full speed
    labelled = re.compile(r"\d+ features labelled by llama3.2")  # at most 20: as many as the run has
    done = page.locator("[data-testid=stAlertContentSuccess]").filter(has_text=labelled)
    expect(done).to_be_visible(timeout=LONG_WORK_MS)
    settle(page)
    shoot(page, "26_labels_done")


def test_the_analysts_walk_in_chromium(browser, fake, corpora_dir, tmp_path):
    articles = pd.read_parquet(corpora_dir / "bbc_news.parquet").sample(N_DOCUMENTS, random_state=2)
    csv = tmp_path / "bbc_walk.csv"
    articles.rename(columns={"label": "category"})[["id", "title", "category", "text"]].to_csv(csv, index=False)
    workspace = tmp_path / "workspace"
    with streamlit_server(workspace, "walk.log", unset=("OLLAMA_API_KEY", "OLLAMA_HOST")) as (url, _):
        context = browser.new_context(viewport={"width": 1400, "height": 1400})
        context.add_init_script(RECORD_CANVAS_TEXT)  # every frame, the graph's iframe too
        page = context.new_page()
        page.goto(url)  # a server's very first request is served by Streamlit's legacy pages/ router, which knows
        settle(page)  # only the file names (test_browser.py covers those); the app's router answers every later one
        for typed, landed in (("Features", "features"), ("train-sae", "train")):
            page.goto(f"{url}/{typed}")
            expect(page.get_by_text("There is no dataset yet.")).to_be_visible(timeout=LONG_WORK_MS)
            settle(page)
            assert_clean(page)
            assert page.url == f"{url}/{landed}"

        upload_and_check_the_text_column(page, csv)
        go(page, "Embeddings")
        page.get_by_role("button", name=f"Embed {N_DOCUMENTS} documents").click()
        expect(page.get_by_text("is embedded with this model: you can train an SAE.")).to_be_visible(
            timeout=LONG_WORK_MS
        )
        settle(page)
        train_while_watching_features(page)

        go(page, "Home")
        expect(page.locator(".st-key-document_map .mark-symbol path").first).to_be_visible(timeout=LONG_WORK_MS)
        assert_clean(page)

        go(page, "Families")
        drawn = graph_labels(page)
        assert drawn and min(drawn.values()) >= READABLE_PX, f"labels too small to read: {drawn}"
        shoot(page, "26_families_default")

        label_the_most_common_features(page, fake)

        run_id = Workspace(workspace).runs()[-1].run_id
        done = run_cli("themes", "--run", run_id, "--n-themes", "3", workspace=workspace)
        assert done.returncode == 0, done.stderr
        go(page, "Features")
        page.reload()
        settle(page)
        regrouped = re.compile(r"^3 themes(, split into \d+ sub-themes)?; a document can belong to more than one")
        expect(page.get_by_text(regrouped)).to_be_visible(timeout=PAGE_MS)

        go(page, "Glossary")
        for term in ("Theme", "τ (tau)", "k (features per document)"):
            expect(page.get_by_text(term, exact=True)).to_be_visible()
        assert page.get_by_text("\u03a4 (tau)", exact=True).count() == 0  # a capital tau
        assert_clean(page)
        context.close()
    assert_clean_log("walk.log")
    assert (ARTIFACTS / "26_families_default.png").is_file()
