"""The Labels page in a real browser: `streamlit run app.py` in headless Debian Chromium, against the loopback Ollama.

The workspace holds a small real run (120 BBC articles, bundled model, 64 features) made with the core. The test
types a hosted server's API key, labels every feature with slow replies, cancels, resumes, and checks the labels on
a feature card; the key must never reach the page. Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from ollama_server import FakeOllama, running_fake_ollama
from playwright.sync_api import Page, expect
from test_browser import ARTIFACTS, REPO, browser, click_in_view, shoot  # noqa: F401 (fixture)

from bench.app_driver import PAGE_MS, go, settle, streamlit_server
from prisma_core import pipeline
from prisma_core.ingest import IngestConfig
from prisma_core.sae import SAEConfig
from prisma_core.store import Workspace

KEY = "sk-browser-0123456789abcdef"
LABEL_MS = 900_000  # labelling the rest on a shared CI CPU (each label is embedded to score it)
ANSWERED_BEFORE_CANCEL = 8
"""Requests answered before the test cancels, so the resumed job finds labels it skips."""


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOllama]:
    with running_fake_ollama() as server:
        server.required_authorization = f"Bearer {KEY}"
        yield server


@pytest.fixture(scope="module")
def labels_server(tmp_path_factory, bbc) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("browser_labels")
    corpus = bbc.sample(120, random_state=3).reset_index(drop=True)
    corpus["text"] = [" ".join(text.split()[:150]) for text in corpus["text"]]
    corpus.to_parquet(folder / "bbc120.parquet")
    workspace = Workspace(folder / "workspace")
    config = IngestConfig(text_column="text", id_column="id")
    dataset_id, _ = pipeline.ingest(workspace, [folder / "bbc120.parquet"], "BBC 120", config)
    pipeline.embed_dataset(workspace, dataset_id)
    pipeline.train_run(workspace, dataset_id, SAEConfig(n_features=64, k=4))

    ARTIFACTS.mkdir(exist_ok=True)
    log_path = ARTIFACTS / "streamlit_labels.log"
    with streamlit_server(workspace.path, log_path, unset=("OLLAMA_API_KEY", "OLLAMA_HOST")) as (url, _):
        yield url
    assert KEY not in log_path.read_text(), "the API key reached the server log"


def enter(page: Page, label: str, text: str) -> None:
    field = page.get_by_label(label, exact=True)
    field.fill(text)
    field.press("Enter")
    settle(page)


def wait_for_requests(fake: FakeOllama, n: int) -> None:
    """Wait until the server has received more than `n` chat requests (a job loads the model first: slow on a shared
    CI CPU)."""
    deadline = time.time() + LABEL_MS / 1000
    while time.time() < deadline and len(fake.requests) <= n:
        time.sleep(0.1)
    assert len(fake.requests) > n, f"the server got {len(fake.requests)} requests, waited for more than {n}"


def click_once(page: Page, name: str, fake: FakeOllama) -> None:
    """Click a button once and wait for the job it starts to send the server a new request."""
    asked = len(fake.requests)
    click_in_view(page, page.get_by_role("button", name=name))
    wait_for_requests(fake, asked)


def test_label_cancel_resume_with_a_hosted_key_in_chromium(labels_server, browser, fake):  # noqa: F811
    page = browser.new_page(viewport={"width": 1400, "height": 1500})
    page.goto(labels_server)
    settle(page)
    go(page, "Labels")
    enter(page, "Ollama server", fake.url)
    expect(page.get_by_text("refused the request (HTTP 401)")).to_be_visible(timeout=PAGE_MS)

    enter(page, "API key for this session", KEY)
    page.get_by_role("button", name="Use this key").click()
    settle(page)
    expect(page.get_by_text("An API key is used (typed for this session)")).to_be_visible(timeout=PAGE_MS)
    expect(page.get_by_label("API key for this session", exact=True)).to_have_value("")
    what_to_label = page.get_by_role("radiogroup", name="What to label")  # default: a first batch, the most common
    what_to_label.get_by_text("All features", exact=True).click()
    settle(page)
    page.get_by_text("Then name every family", exact=True).click()
    settle(page)
    expect(page.get_by_text("requests", exact=False).first).to_be_visible()

    fake.delay_s = 0.3
    click_once(page, "Start", fake)
    expect(page.get_by_text("Naming features")).to_be_visible(timeout=PAGE_MS)
    wait_for_requests(fake, ANSWERED_BEFORE_CANCEL)
    shoot(page, "8_labels_running")
    page.get_by_role("button", name="Cancel").click()
    expect(page.get_by_text("cancelled", exact=False).first).to_be_visible(timeout=LABEL_MS)
    settle(page)
    expect(page.get_by_text("still to label")).to_be_visible()
    asked = len(fake.requests)

    fake.delay_s = 0.0
    click_once(page, "Resume", fake)
    try:
        expect(page.get_by_text("already had a label from this model", exact=False)).to_be_visible(timeout=LABEL_MS)
    finally:
        shoot(page, "8_labels_resumed")
    settle(page)
    shoot(page, "8_labels_done")
    prompts = fake.user_prompts()
    assert len(prompts) == len(set(prompts)), "a feature was asked about twice"
    assert len(fake.requests) > asked and set(fake.authorizations[-3:]) == {f"Bearer {KEY}"}
    assert KEY not in page.content()

    go(page, "Features")
    label_from = page.locator("[data-testid=stMetric]").filter(has_text="Label from")  # tables draw on a canvas
    expect(label_from).to_contain_text(re.compile("llama3.2:latest|keywords"), timeout=PAGE_MS)
    if "keywords" in label_from.inner_text():  # the model's label scored worse: the card says why it is not shown
        expect(page.get_by_text("the keywords stay shown", exact=False)).to_be_visible()
    expect(page.get_by_text("Chance is 0.50", exact=False)).to_be_visible(timeout=PAGE_MS)
    assert KEY not in page.content()
    shoot(page, "8_labels_card")
