"""App latency with a 10,000-document dataset: first paint of Home on a fresh server, page switches, and semantic
search from vectors in memory against LanceDB's search through the store.

The workspace is built headlessly with the command line's `run` (AG News test set, BBC and a few MTSamples notes:
10,000 real documents; kept under --cache, so later runs reuse it and its embeddings). Two apps are timed side by
side, interleaved: this checkout and the baseline commit's (`git archive`), each its own `streamlit run` server
driven in headless Chromium, each on a workspace its own code built from the same documents (an older app cannot
read the settings a newer run records). First paint: a fresh server each time, from opening the address to Home's
heading on screen (the last one on the server whose pages are then switched). Page switches: one server per app, every
page opened ROUNDS times, the apps taking turns page by page, each switch timed in the browser from the click on the
sidebar link to the page's heading and to the end of its script run; the first visit of a page fills its caches, so it
is reported apart from the p50/p95 of the later visits.
Search: exact numpy cosine search over vectors held in memory (`prisma_core.reading.explore.DocumentVectors`) against
`Workspace.search_documents` (LanceDB), query by query in turn, at the run's 10,000 vectors and at 200,000.

.venv/bin/python -m bench.app_latency            # 10,000 documents, 5 rounds, 2 first paints per app
.venv/bin/python -m bench.app_latency --quick    # 100 documents, 2 epochs, 2 rounds, 1 first paint, 2,000 vectors

With --views it times instead what an analyst waits for when opening a trained run, on the shared corpora (BBC News
and MTSamples, two datasets each trained with the command line's defaults; --workspace names one already built): on a
fresh server and a fresh copy of the workspace, from opening the address to Home's last section on screen, drawn after
the newest run's themes and map (the first view of a trained run), then from choosing the other dataset in the sidebar
to that section naming it (a dataset switch). The two apps take turns, VIEW_ROUNDS times each. Target: 5 s each.

.venv/bin/python -m bench.app_latency --views --baseline b995106 --workspace /tmp/views_ws
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from playwright.sync_api import Browser, Page

from bench import common
from bench.app_driver import PAGE_MS, chromium, streamlit_server
from prisma_core.reading.explore import DocumentVectors
from prisma_core.store import Workspace

NAME = "app_latency"
TITLE = "11. App latency: first paint, page switches and search with 10,000 documents"
DOCS, QUICK_DOCS = 10_000, 100
QUICK_RUN_FLAGS = ("--epochs", "2")
"""The quick run's workspaces train for 2 epochs (the baseline's 384 features for 20 epochs took minutes): the pages
and searches it times need a trained run, not a good one."""
ROUNDS, QUICK_ROUNDS = 5, 2
PAINTS = 2
BASELINE = "474d402"
"""The commit before this work: its app runs side by side with this one."""
SEARCH_ROWS, QUICK_SEARCH_ROWS = 200_000, 2_000
QUERIES, QUICK_QUERIES = 30, 5
LIMIT = 10
TARGETS = {"first_paint_s": 3.0, "switch_p95_s": 1.0}
FIRST_RUN_MS = 300_000
POLL_MS = 20
"""How often the browser checks for the page's heading (the end of a run is recorded as it happens)."""
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
  window.__clicks = [];
  document.addEventListener('click', () => window.__clicks.push(performance.now()), true);
  const app = document.querySelector('[data-testid=stApp]');
  new MutationObserver(() => window.__runs.push([performance.now(), app.getAttribute('data-test-script-state')]))
    .observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
}"""
"""Records every click and every change of the app's script-run state with its time (so the end of a run is never
missed, and a switch is timed from the click as the page received it, not from the driver's call)."""
HEADING_SHOWN = """(title) => {
  const heading = [...document.querySelectorAll('[data-testid=stMain] h1')].find(h => h.textContent.trim() === title);
  return heading && heading.closest('[data-stale=true]') === null && performance.now();
}"""
RUN_DONE = """(since) => {
  const runs = window.__runs.filter(([t]) => t >= since);
  if (!runs.length) {
    const state = document.querySelector('[data-testid=stApp]').getAttribute('data-test-script-state');
    return state === 'notRunning' && performance.now();
  }
  const last = runs[runs.length - 1];
  return last[1] === 'notRunning' && last[0];
}"""
"""The end of the run a click started: the last change to "notRunning" since the click (asked once the page's heading
shows, so that run has begun); a quick run whose "running" state React never drew leaves no change at all."""


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


def trained_workspace(
    folder: Path, n_docs: int, code: Path = common.REPO, name: str = "", flags: tuple[str, ...] = ()
) -> Path:
    """A workspace holding n_docs documents and a run trained with the defaults but for `flags` (of the command line's
    `run`); built once by the command line of the checkout `code` (`name` tells another checkout's workspace apart)."""
    path = (folder / f"app_latency_{n_docs}{name and '_' + name}").resolve()
    if path.exists() and Workspace(path).runs():
        return path
    csv = (folder / f"app_latency_{n_docs}.csv").resolve()
    folder.mkdir(parents=True, exist_ok=True)
    corpus(n_docs).to_csv(csv, index=False)
    command = [sys.executable, "-m", "prisma_core", "run", "--workspace", str(path), "--text-column", "text"]
    columns = ["--id-column", "id", "--title-column", "title", "--name", f"{n_docs:,} news and notes"]
    subprocess.run([*command, *columns, *flags, str(csv)], check=True, cwd=code)
    return path


# -- the browser -------------------------------------------------------------------------------------------------


def baseline_checkout(ref: str, folder: Path) -> Path:
    """The app as it was at `ref` (git archive into folder), run side by side with this checkout's."""
    folder.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(common.REPO), "archive", ref], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def first_paint(browser: Browser, workspace: Path, app_dir: Path, log: Path) -> float:
    """Seconds from opening a fresh server's address to Home's heading on screen."""
    with streamlit_server(workspace, log, app_dir=app_dir) as (url, _):
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        seconds = paint(page, url)
        page.close()
    return seconds


def paint(page: Page, url: str) -> float:
    """Seconds from opening the address to Home's heading on screen."""
    started = time.perf_counter()
    page.goto(url)
    page.get_by_role("heading", name=PAGES["Home"], exact=True).wait_for(timeout=FIRST_RUN_MS)
    return time.perf_counter() - started


def open_home(page: Page, url: str) -> float:
    """Home's first run over (a fresh server computes the map of the documents there), then the run watcher; the
    seconds to Home's heading (this server's first paint)."""
    seconds = paint(page, url)
    page.wait_for_function(
        "() => document.querySelector('[data-testid=stApp]')?.getAttribute('data-test-script-state') === 'notRunning'",
        timeout=FIRST_RUN_MS,
    )
    page.evaluate(WATCH_RUNS)
    return seconds


def switch(page: Page, link: str) -> dict[str, float]:
    """Click a page's sidebar link: seconds to its heading (not stale) and to the end of the script run."""
    page.bring_to_front()  # the apps' pages take turns; a page in the background would be throttled
    target = page.locator("[data-testid=stSidebar] [data-testid=stPageLink]").get_by_text(link, exact=True)
    target.wait_for(timeout=PAGE_MS)
    clicks = page.evaluate("window.__clicks.length")
    target.click()
    clicked = page.evaluate(f"window.__clicks[{clicks}]")
    heading = page.wait_for_function(HEADING_SHOWN, arg=PAGES[link], timeout=PAGE_MS, polling=POLL_MS).json_value()
    done = page.wait_for_function(RUN_DONE, arg=clicked, timeout=PAGE_MS, polling=POLL_MS).json_value()
    return {"heading_s": (heading - clicked) / 1000, "done_s": (max(done, heading) - clicked) / 1000}


def browse(apps: dict[str, tuple[Path, Path]], scratch: Path, rounds: int, paints: int) -> dict[str, Any]:
    """For each app (name -> its checkout and workspace), interleaved: `paints` first paints on fresh servers, the
    last on one server per app whose pages are then all opened `rounds` times, the apps taking turns page by page."""
    paint_s: dict[str, list[float]] = {name: [] for name in apps}
    visits: dict[str, dict[str, list[dict[str, float]]]] = {name: {link: [] for link in PAGES} for name in apps}
    with chromium() as browser, ExitStack() as stack:
        for attempt in range(paints - 1):  # the last first paint is the browsing server's
            for name, (app_dir, workspace) in apps.items():
                paint_s[name].append(first_paint(browser, workspace, app_dir, scratch / f"{name}_paint{attempt}.log"))
        pages = {}
        for name, (app_dir, workspace) in apps.items():
            url, _ = stack.enter_context(streamlit_server(workspace, scratch / f"{name}.log", app_dir=app_dir))
            pages[name] = browser.new_page(viewport={"width": 1400, "height": 1000})
            paint_s[name].append(open_home(pages[name], url))
        for _ in range(rounds):
            for link in [*list(PAGES)[1:], "Home"]:
                for name, page in pages.items():
                    visits[name][link].append(switch(page, link))
    return {
        name: {
            "first_paint_s": paint_s[name],
            "pages": {link: page_summary(times) for link, times in visits[name].items()},
        }
        for name in apps
    }


def page_summary(visits: list[dict[str, float]]) -> dict[str, Any]:
    """The first visit apart (it fills the caches), p50/p95 of the later ones."""
    later = visits[1:] or visits
    summary: dict[str, Any] = {"first_visit": visits[0], "visits": len(visits)}
    for measure in ("heading_s", "done_s"):
        values = np.array([visit[measure] for visit in later])
        summary[measure] = {"p50": float(np.percentile(values, 50)), "p95": float(np.percentile(values, 95))}
    return summary


# -- first views ---------------------------------------------------------------------------------------------------

VIEW_DATASETS = ("bbc_news", "mtsamples")
VIEW_ROUNDS = 2
VIEW_TARGET_S = 5.0
THEMES_HEADING = "What this collection is about"
LAST_SECTION = "Next step"
VIEW_MS = 1_800_000  # the app before drew the map (t-SNE) before showing the rest: over 5 minutes at load 20


def corpora_workspace(folder: Path) -> Path:
    """The shared corpora's BBC News and MTSamples as two datasets, each trained by the command line's `run` with its
    defaults; built once under `folder`."""
    path = (folder / "app_views").resolve()
    if path.exists() and len(Workspace(path).runs()) >= len(VIEW_DATASETS):
        return path
    for name in VIEW_DATASETS:
        command = [sys.executable, "-m", "prisma_core", "run", "--workspace", str(path), "--name", name]
        columns = ["--text-column", "text", "--id-column", "id", "--title-column", "title"]
        subprocess.run([*command, *columns, str(common.CORPORA_DIR / f"{name}.parquet")], check=True, cwd=common.REPO)
    return path


def first_views(browser: Browser, workspace: Path, app_dir: Path, scratch: Path, name: str) -> dict[str, float]:
    """On a fresh server and a fresh copy of `workspace`: seconds to the first view of the newest run (from opening
    the address to Home's last section, "Next step", on screen: drawn after the run's themes and map), then to a
    dataset switch (from the click on the other dataset in the sidebar to that section naming it)."""
    copy = scratch / f"{name}_workspace"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(workspace, copy)
    other = Workspace(copy).datasets()[0].name  # the sidebar opens on the newest dataset
    with streamlit_server(copy, scratch / f"{name}.log", app_dir=app_dir) as (url, _):
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        started = time.perf_counter()
        page.goto(url)
        page.get_by_role("heading", name=THEMES_HEADING).wait_for(timeout=VIEW_MS)
        page.get_by_role("heading", name=LAST_SECTION).wait_for(timeout=VIEW_MS)
        first = time.perf_counter() - started
        page.locator("[data-testid=stSidebar] [data-testid=stSelectbox]").first.click()
        page.get_by_role("option").filter(has_text=other).click()
        clicked = time.perf_counter()
        # Home's next step names the dataset shown (whether this app's vector space is the stored one or not)
        page.locator("[data-testid=stMain]").get_by_text(f"“{other}”").first.wait_for(timeout=VIEW_MS)
        switched = time.perf_counter() - clicked
        page.close()
    return {"first_view_s": first, "switch_s": switched}


def views(workspace: Path, baseline: str, rounds: int, baseline_app: Path | None = None) -> dict[str, Any]:
    """`first_views` of the baseline's app (`baseline_app`, else a `git archive` of `baseline`) and this checkout's,
    taking turns `rounds` times."""
    with tempfile.TemporaryDirectory(prefix="prisma_app_views_") as folder, chromium() as browser:
        scratch = Path(folder)
        old = baseline_app or baseline_checkout(baseline, scratch / "baseline")
        apps = {"baseline": old, "prisma": common.REPO}
        timed: dict[str, list[dict[str, float]]] = {name: [] for name in apps}
        for attempt in range(rounds):
            for name in common.rotated(list(apps), attempt):
                timed[name].append(first_views(browser, workspace, apps[name], scratch, f"{name}{attempt}"))
    documents = {d.name: d.n_documents for d in Workspace(workspace).datasets()}
    return {"device": common.device_report(), "baseline": baseline, "documents": documents, "apps": timed}


def markdown_views(result: dict[str, Any]) -> str:
    rows = [
        [name, ", ".join(f"{v['first_view_s']:.1f}" for v in visits), ", ".join(f"{v['switch_s']:.1f}" for v in visits)]
        for name, visits in result["apps"].items()
    ]
    datasets = ", ".join(f"{name} ({n:,} documents)" for name, n in result["documents"].items())
    table = common.markdown_table(["App", "First view of a trained run, s", "Dataset switch, s"], rows)
    return f"Datasets: {datasets}; baseline: commit {result['baseline']}; target {VIEW_TARGET_S:.0f} s.\n\n{table}"


# -- search ------------------------------------------------------------------------------------------------------


def search_comparison(vectors: np.ndarray, queries: np.ndarray, scratch: Path) -> dict[str, Any]:
    """Exact search in memory vs the store's search on the same vectors, query by query in turn; recall@10 of the
    store against the exact answer."""
    workspace = Workspace(scratch / f"search_{len(vectors)}")
    documents = pd.DataFrame({"doc_id": [str(i) for i in range(len(vectors))], "text": ["document"] * len(vectors)})
    dataset_id = workspace.add_dataset("search", documents, ["synthetic"], {})
    workspace.save_vectors(dataset_id, "bench|fp32", vectors)
    in_memory = DocumentVectors.from_vectors(workspace.vectors(dataset_id, "bench|fp32"))

    def store_search(query: np.ndarray) -> pd.DataFrame:
        return workspace.search_documents(dataset_id, "bench|fp32", query, LIMIT)

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
        "numpy_p50_ms": float(np.median(numpy_ms)),
        "store_p50_ms": float(np.median(store_ms)),
        "ratio": float(np.median(store_ms / numpy_ms)),
        "recall_at_10": float(np.mean(recalls)),
    }


def search(workspace_path: Path, scratch: Path, quick: bool) -> list[dict[str, Any]]:
    workspace = Workspace(workspace_path)
    run = workspace.runs()[-1]
    vectors = workspace.vectors(run.dataset_id, run.embedding_key)
    queries = common.resample(vectors, QUICK_QUERIES if quick else QUERIES, seed=7)
    large = common.resample(vectors, QUICK_SEARCH_ROWS if quick else SEARCH_ROWS, seed=6)
    return [search_comparison(data, queries, scratch) for data in (vectors, large)]


# -- the benchmark -----------------------------------------------------------------------------------------------


def run(
    quick: bool = False, cache_dir: Path = common.RESULTS_DIR / "cache", baseline: str = BASELINE
) -> dict[str, Any]:
    n_docs, flags = (QUICK_DOCS, QUICK_RUN_FLAGS) if quick else (DOCS, ())
    workspace = trained_workspace(cache_dir, n_docs, flags=flags)
    with tempfile.TemporaryDirectory(prefix="prisma_app_latency_") as folder:
        scratch = Path(folder)
        baseline_code = baseline_checkout(baseline, scratch / "baseline")
        apps = {
            "baseline": (baseline_code, trained_workspace(cache_dir, n_docs, baseline_code, baseline, flags)),
            "prisma": (common.REPO, workspace),
        }
        rounds, paints = (QUICK_ROUNDS, 1) if quick else (ROUNDS, PAINTS)
        browsing = browse(apps, scratch, rounds, paints)
        searches = search(workspace, scratch, quick)
    return {
        "device": common.device_report(),
        "quick": quick,
        "documents": n_docs,
        "baseline": baseline,
        "apps": browsing,
        "search": searches,
    }


def worst_p95(app: dict[str, Any]) -> float:
    """The slowest page's p95 switch time, to the end of its run."""
    return max(summary["done_s"]["p95"] for summary in app["pages"].values())


def markdown(result: dict[str, Any]) -> str:
    base, new = result["apps"]["baseline"], result["apps"]["prisma"]
    paint_base, paint_new = common.median(base["first_paint_s"]), common.median(new["first_paint_s"])
    rows = [
        [
            link,
            base["pages"][link]["done_s"]["p50"],
            base["pages"][link]["done_s"]["p95"],
            summary["done_s"]["p50"],
            summary["done_s"]["p95"],
            summary["heading_s"]["p95"],
            base["pages"][link]["done_s"]["p50"] / summary["done_s"]["p50"],
            base["pages"][link]["first_visit"]["done_s"],
            summary["first_visit"]["done_s"],
        ]
        for link, summary in new["pages"].items()
    ]
    header = ["Page", "before p50 s", "before p95 s", "now p50 s", "now p95 s", "now p95 s to heading"]
    pages = common.markdown_table([*header, "p50 before / now", "first visit before s", "first visit now s"], rows)
    searches = common.markdown_table(
        ["Vectors", "Queries", "numpy in memory p50 ms", "LanceDB p50 ms", "LanceDB / numpy", "LanceDB recall@10"],
        [
            [s["rows"], s["queries"], s["numpy_p50_ms"], s["store_p50_ms"], s["ratio"], s["recall_at_10"]]
            for s in result["search"]
        ],
    )
    worst = worst_p95(new)
    verdicts = (
        common.verdict(paint_new, TARGETS["first_paint_s"], higher_is_better=False),
        common.verdict(worst, TARGETS["switch_p95_s"], higher_is_better=False),
    )
    visits = new["pages"]["Home"]["visits"]
    return f"""{result["documents"]:,} documents, one run trained with the defaults; "before" is the app at commit
{result["baseline"]}, run side by side (servers and page visits interleaved).

- First paint of Home on a fresh server (opening the address to the heading on screen, median of
  {len(new["first_paint_s"])}): now {paint_new:.2f} s, before {paint_base:.2f} s ({paint_base / paint_new:.2f}x). Target
  {TARGETS["first_paint_s"]:.0f} s: {verdicts[0]}.
- Page switches, from the click to the end of the page's run, {visits} visits per page, p50/p95 over the visits
  after the first (which fills the caches): slowest p95 now {worst:.2f} s, before {worst_p95(base):.2f} s. Target
  {TARGETS["switch_p95_s"]:.0f} s: {verdicts[1]}.

{pages}

Semantic search, top {LIMIT} by cosine, on the same vectors and queries, the two searches taking turns:

{searches}"""


def main() -> None:
    arguments = common.parser(__doc__.splitlines()[0])
    arguments.add_argument("--baseline", default=BASELINE, help="the commit whose app is timed side by side")
    arguments.add_argument("--views", action="store_true", help="first view of a run and a dataset switch")
    arguments.add_argument("--workspace", type=Path, help="with --views: a workspace corpora_workspace built")
    arguments.add_argument("--baseline-app", type=Path, help="with --views: the baseline's checkout, already there")
    args = arguments.parse_args()
    if args.views:
        workspace = args.workspace or corpora_workspace(args.cache)
        timed = views(workspace, args.baseline, VIEW_ROUNDS, args.baseline_app)
        common.publish(f"{NAME}_views", timed, args, markdown_views)
        return
    common.publish(NAME, run(args.quick, args.cache, args.baseline), args, markdown)


if __name__ == "__main__":
    main()
