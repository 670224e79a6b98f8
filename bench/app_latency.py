"""App latency with a 10,000-document dataset: first paint of Home on a fresh server, page switches, and semantic
search from vectors in memory against LanceDB's search through the store.

The workspace is built headlessly with the command line's `run` (AG News test set, BBC and a few MTSamples notes:
10,000 real documents; kept under --cache, so later runs reuse it and its embeddings). A fresh `streamlit run app.py`
server is started and driven in headless Chromium: first paint is the time from opening the address to Home's
heading on screen (and to the end of the script run); then every page is opened in turn, ROUNDS times, each switch
timed from the click on its sidebar link to its heading (and to the end of the run). The first visit of a page
loads what it caches, so it is reported apart from the p50/p95 of the later visits. Search: exact numpy cosine
search over the run's vectors held in memory (`prisma_core.explore.DocumentVectors`) against
`Workspace.search_documents` (LanceDB), interleaved query by query, at the dataset's size and at 200,000 vectors.

.venv/bin/python -m bench.app_latency            # 10,000 documents, 5 rounds of page switches
.venv/bin/python -m bench.app_latency --quick    # 300 documents, 2 rounds, 2,000 vectors
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from playwright.sync_api import Page

from bench import common
from bench.app_driver import PAGE_MS, chromium, streamlit_server
from prisma_core.explore import DocumentVectors
from prisma_core.store import Workspace

NAME = "app_latency"
TITLE = "9. App latency: first paint, page switches and search with 10,000 documents"
COMMAND = common.command(NAME)
DOCS, QUICK_DOCS = 10_000, 300
ROUNDS, QUICK_ROUNDS = 5, 2
SEARCH_ROWS, QUICK_SEARCH_ROWS = 200_000, 2_000
QUERIES, QUICK_QUERIES = 30, 5
LIMIT = 10
TARGETS = {"first_paint_s": 3.0, "switch_p95_s": 1.0}
FIRST_RUN_MS = 300_000
PAGES = {
    "Home": "Prisma",
    "Datasets": "Datasets",
    "Embeddings": "Embeddings",
    "Train SAE": "Train a sparse autoencoder",
    "Features": "Features",
    "Families": "Feature families",
    "Labels": "Labels",
    "Explore": "Explore",
    "Glossary": "Glossary",
}
"""Sidebar link -> the page's heading (its main element)."""

WATCH_RUNS = """() => {
  window.__runs = [];
  const app = document.querySelector('[data-testid=stApp]');
  new MutationObserver(() => window.__runs.push([performance.now(), app.getAttribute('data-test-script-state')]))
    .observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
}"""
"""Records every change of the app's script-run state with its time, so the end of a run is never missed."""
HEADING_SHOWN = """(title) => {
  const heading = [...document.querySelectorAll('[data-testid=stMain] h1')].find(h => h.textContent.trim() === title);
  return heading && heading.closest('[data-stale=true]') === null && performance.now();
}"""
RUN_DONE = """(since) => {
  const runs = window.__runs.filter(([t]) => t >= since);
  const last = runs[runs.length - 1];
  return runs.some(([, s]) => s === 'running') && last[1] === 'notRunning' && last[0];
}"""


# -- the workspace -----------------------------------------------------------------------------------------------


def corpus(n_docs: int) -> pd.DataFrame:
    """n_docs real documents (id, title, text, category): all of AG News' test set, then BBC, then MTSamples notes,
    in that order (a quick run takes a seeded sample of the three)."""
    frames = [
        pd.read_parquet(common.CORPORA_DIR / f"{name}.parquet", columns=["id", "title", "text", "label"]).assign(
            id=lambda frame, name=name: name + "-" + frame["id"].astype(str)
        )
        for name in ("ag_news_test", "bbc_news", "mtsamples")
    ]
    everything = pd.concat(frames, ignore_index=True).rename(columns={"label": "category"})
    everything = everything[everything["text"].fillna("").str.strip() != ""]
    if n_docs < DOCS:
        return everything.sample(n_docs, random_state=0).reset_index(drop=True)
    return everything.head(n_docs).reset_index(drop=True)


def trained_workspace(folder: Path, n_docs: int) -> Path:
    """A workspace holding n_docs documents and a run trained with the defaults; built once by the command line."""
    path = folder / f"app_latency_{n_docs}"
    if path.exists() and Workspace(path).runs():
        return path
    csv = folder / f"app_latency_{n_docs}.csv"
    folder.mkdir(parents=True, exist_ok=True)
    corpus(n_docs).to_csv(csv, index=False)
    command = [sys.executable, "-m", "prisma_core", "run", "--workspace", str(path), "--text-column", "text"]
    subprocess.run(
        [*command, "--id-column", "id", "--title-column", "title", "--name", f"{n_docs:,} news and notes", str(csv)],
        check=True,
    )
    return path


# -- the browser -------------------------------------------------------------------------------------------------


def first_paint(page: Page, url: str) -> dict[str, float]:
    """Seconds from opening the address to Home's heading on screen, and to the end of its first script run."""
    started = time.perf_counter()
    page.goto(url)
    page.get_by_role("heading", name=PAGES["Home"], exact=True).wait_for(timeout=FIRST_RUN_MS)
    heading = time.perf_counter() - started
    page.wait_for_function(
        "() => document.querySelector('[data-testid=stApp]')?.getAttribute('data-test-script-state') === 'notRunning'",
        timeout=FIRST_RUN_MS,
    )
    return {"heading_s": heading, "done_s": time.perf_counter() - started}


def switch(page: Page, link: str) -> dict[str, float]:
    """Click a page's sidebar link: seconds to its heading (not stale) and to the end of the script run."""
    target = page.locator("[data-testid=stSidebar] [data-testid=stPageLink]").get_by_text(link, exact=True)
    target.wait_for(timeout=PAGE_MS)
    clicked = page.evaluate("performance.now()")
    target.click()
    heading = page.wait_for_function(HEADING_SHOWN, arg=PAGES[link], timeout=PAGE_MS, polling="raf").json_value()
    done = page.wait_for_function(RUN_DONE, arg=clicked, timeout=PAGE_MS, polling="raf").json_value()
    return {"heading_s": (heading - clicked) / 1000, "done_s": (max(done, heading) - clicked) / 1000}


def browse(workspace: Path, scratch: Path, rounds: int) -> dict[str, Any]:
    """First paint on a fresh server, then every page `rounds` times."""
    visits: dict[str, list[dict[str, float]]] = {link: [] for link in PAGES}
    with chromium() as browser, streamlit_server(workspace, scratch / "server.log") as (url, _):
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        paint = first_paint(page, url)
        page.evaluate(WATCH_RUNS)
        for _ in range(rounds):
            for link in [*list(PAGES)[1:], "Home"]:
                visits[link].append(switch(page, link))
        page.close()
    return {"first_paint": paint, "pages": {link: page_summary(times) for link, times in visits.items()}}


def page_summary(visits: list[dict[str, float]]) -> dict[str, Any]:
    """The first visit apart (it fills the caches), p50/p95 of the later ones."""
    later = visits[1:] or visits
    summary: dict[str, Any] = {"first_visit": visits[0], "visits": len(visits)}
    for measure in ("heading_s", "done_s"):
        values = np.array([visit[measure] for visit in later])
        summary[measure] = {"p50": float(np.percentile(values, 50)), "p95": float(np.percentile(values, 95))}
    return summary


# -- search ------------------------------------------------------------------------------------------------------


def search_comparison(vectors: np.ndarray, queries: np.ndarray, scratch: Path) -> dict[str, Any]:
    """Exact search in memory vs the store's search on the same vectors, query by query in turn; recall@10 of the
    store against the exact answer."""
    workspace = Workspace(scratch / f"search_{len(vectors)}")
    documents = pd.DataFrame({"doc_id": [str(i) for i in range(len(vectors))], "text": ["document"] * len(vectors)})
    dataset_id = workspace.add_dataset("search", documents, ["synthetic"], {})
    workspace.save_vectors(dataset_id, "bench|fp32", vectors)
    load_s, in_memory = common.timed(lambda: DocumentVectors.from_vectors(workspace.vectors(dataset_id, "bench|fp32")))
    store_search = lambda query: workspace.search_documents(dataset_id, "bench|fp32", query, LIMIT)  # noqa: E731
    store_search(queries[0])  # open the table once, as a running app has
    numpy_s, store_s, recalls = [], [], []
    for query in queries:
        elapsed, exact = common.timed(lambda query=query: in_memory.nearest(query, LIMIT))
        numpy_s.append(elapsed)
        elapsed, hits = common.timed(lambda query=query: store_search(query))
        store_s.append(elapsed)
        recalls.append(len(np.intersect1d(exact["position"], hits["position"])) / LIMIT)
    numpy_ms, store_ms = np.array(numpy_s) * 1000, np.array(store_s) * 1000
    return {
        "rows": len(vectors),
        "queries": len(queries),
        "load_vectors_s": load_s,
        "numpy_p50_ms": float(np.median(numpy_ms)),
        "store_p50_ms": float(np.median(store_ms)),
        "ratio": float(np.median(store_ms / numpy_ms)),
        "recall_at_10": float(np.mean(recalls)),
    }


def search(workspace_path: Path, scratch: Path, quick: bool) -> list[dict[str, Any]]:
    workspace = Workspace(workspace_path)
    (run,) = workspace.runs()[-1:]
    vectors = workspace.vectors(run.dataset_id, run.embedding_key)
    queries = common.resample(vectors, QUICK_QUERIES if quick else QUERIES, seed=7)
    large = common.resample(vectors, QUICK_SEARCH_ROWS if quick else SEARCH_ROWS, seed=6)
    return [search_comparison(data, queries, scratch) for data in (vectors, large)]


# -- the benchmark -----------------------------------------------------------------------------------------------


def run(quick: bool = False, cache_dir: Path = common.RESULTS_DIR / "cache") -> dict[str, Any]:
    n_docs = QUICK_DOCS if quick else DOCS
    workspace = trained_workspace(cache_dir, n_docs)
    with tempfile.TemporaryDirectory(prefix="prisma_app_latency_") as folder:
        scratch = Path(folder)
        browsing = browse(workspace, scratch, QUICK_ROUNDS if quick else ROUNDS)
        searches = search(workspace, scratch, quick)
    return {"device": common.device_report(), "quick": quick, "documents": n_docs} | browsing | {"search": searches}


def markdown(result: dict[str, Any]) -> str:
    paint = result["first_paint"]
    rows = [
        [
            link,
            summary["first_visit"]["done_s"],
            summary["heading_s"]["p50"],
            summary["heading_s"]["p95"],
            summary["done_s"]["p50"],
            summary["done_s"]["p95"],
        ]
        for link, summary in result["pages"].items()
    ]
    pages = common.markdown_table(
        [
            "Page",
            "First visit s (to run end)",
            "p50 s to heading",
            "p95 s to heading",
            "p50 s to run end",
            "p95 s to run end",
        ],
        rows,
    )
    worst = max(summary["done_s"]["p95"] for summary in result["pages"].values())
    searches = common.markdown_table(
        [
            "Vectors",
            "Queries",
            "numpy in memory p50 ms",
            "LanceDB store p50 ms",
            "Ratio store / numpy",
            "Recall@10 of the store",
            "Loading the vectors s",
        ],
        [
            [
                s["rows"],
                s["queries"],
                s["numpy_p50_ms"],
                s["store_p50_ms"],
                s["ratio"],
                s["recall_at_10"],
                s["load_vectors_s"],
            ]
            for s in result["search"]
        ],
    )
    return f"""{result["documents"]:,} documents, one run trained with the defaults. First paint of Home on a fresh
server: heading after {paint["heading_s"]:.2f} s, first run over after {paint["done_s"]:.2f} s (target
{TARGETS["first_paint_s"]:.0f} s: {common.verdict(paint["heading_s"], TARGETS["first_paint_s"], higher_is_better=False)}).
Page switches, {result["pages"]["Home"]["visits"]} visits per page; p50/p95 over the visits after the first; worst
p95 to the end of the run {worst:.2f} s (target {TARGETS["switch_p95_s"]:.0f} s:
{common.verdict(worst, TARGETS["switch_p95_s"], higher_is_better=False)}).

{pages}

Semantic search, top {LIMIT} by cosine, both searches on the same vectors and queries, interleaved:

{searches}"""


def main() -> None:
    args = common.parser(__doc__.splitlines()[0]).parse_args()
    common.publish(NAME, run(args.quick, args.cache), args, markdown)


if __name__ == "__main__":
    main()
