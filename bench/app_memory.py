"""Memory of the app as an analyst uses it: a real `streamlit run app.py` server driven in headless Chromium.

Scenarios, each on a fresh server and workspace: the one-click demo (400 MTSamples notes from the local copy) then
Features, Families and Explore; and a session on 2,000 real documents (AG News and BBC articles written to a CSV
outside the repository): upload, create the dataset, embed, train with the suggested settings (keyword labels and
families come with it), then every page. Every ~0.2 s the resident memory of the server process and all its children
is summed (what a host such as Streamlit Community Cloud counts); the report gives the peak per phase and overall,
and the server's own VmHWM. The baseline comes from the same run: a bare `streamlit run` of an empty script, and
the import footprint of the libraries (together and one by one), so the app's own share reads as a difference.

.venv/bin/python -m bench.app_memory            # both scenarios (about 10 minutes on 2 cores)
.venv/bin/python -m bench.app_memory --quick    # 80 demo notes and 200 documents

With --walk it runs the analyst's whole walk in ONE server instead (what Streamlit Community Cloud's 1 GB must hold):
the demo, every page, the 2,000-document upload (create, embed, train), every page, labelling every feature of the
upload's run (then its families and themes) with an LLM served by the tests' loopback Ollama (tests/helpers/
ollama_server.py, answering at once), Compare groups, every download of Explore, and every page again. With
--baseline-app DIR the same walk runs next on another checkout's app (e.g. `git archive` of an older commit on the
same venv), on a fresh workspace.

.venv/bin/python -m bench.app_memory --walk --baseline-app /tmp/prisma_b995106
.venv/bin/python -m bench.app_memory --walk --shipped-demo   # the demo on the 150 notes shipped with Prisma

With --workspace PATH it runs one other scenario instead: the app opened on an EXISTING workspace (its newest
dataset and run, as the sidebar picks them), visiting every page and every Explore tab, counting tokens on the
Embeddings page, searching by meaning and refracting a document (by id where the app asks for one), with each page's
peak memory and seconds. --baseline-app DIR then runs another checkout's app (e.g. `git archive` of an older commit,
on the same venv) on the same workspace, in the same run. The app never writes into the workspace on these
visits, but point it at a copy anyway.

.venv/bin/python -m bench.app_memory --workspace /data/ws1m --baseline-app /tmp/prisma_07f5e0a
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
from playwright.sync_api import Browser, Page, expect
from playwright.sync_api import Error as PlaywrightError

from bench import common
from bench.app_driver import PAGE_MS, chromium, go, settle, streamlit_server
from prisma_core.demo import sample_size

NAME = "app_memory"
TITLE = "8. App memory: the demo and a 2,000-document session in a browser"
TARGETS_MB = {"demo": 1000, "upload": 1500}
DEMO_DOCS, QUICK_DEMO_DOCS = 400, 80
UPLOAD_DOCS, QUICK_UPLOAD_DOCS = 2000, 200
LONG_WORK_MS = 10_800_000  # three hours: on the shared 2-core machine at load 20 the 400-note demo took over 30 minutes
FIRST_RUN_MS = 300_000  # a fresh server's first run imports torch and the app: slow on a shared CPU
SAMPLE_S = 0.2
LIBRARIES = ["torch", "sentence_transformers", "lancedb", "pandas", "sklearn", "scipy", "streamlit", "openvino"]
TOGETHER = "torch, sentence_transformers, lancedb, pandas"
UPLOAD_PAGES = ["Home", "Features", "Families", "Labels", "Explore", "Glossary", "Datasets", "Embeddings", "Train SAE"]
EXPLORE_TABS = ["Search", "Concept query", "Compare groups", "Map", "Downloads"]


# -- memory of a process tree (Linux /proc) -------------------------------------------------------------------


def status_mb(pid: int, field: str) -> float:
    """A memory line of /proc/<pid>/status (VmRSS, VmHWM), in MB; 0 when the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    except (OSError, ProcessLookupError):
        pass
    return 0.0


def process_tree(pid: int) -> list[int]:
    """pid and all its descendants."""
    tree, pending = [], [pid]
    while pending:
        current = pending.pop()
        tree.append(current)
        for children in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                pending += [int(child) for child in children.read_text().split()]
            except OSError:  # the thread or process ended meanwhile
                continue
    return tree


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and all its descendants, summed, in MB."""
    return sum(status_mb(member, "VmRSS") for member in process_tree(pid))


class TreeSampler:
    """Samples tree_rss_mb(pid) every `interval` seconds in a thread, keeping the peak of each named phase."""

    def __init__(self, pid: int, interval: float = SAMPLE_S, limit_mb: float | None = None) -> None:
        self.pid, self.interval, self.limit_mb = pid, interval, limit_mb
        self.phase = "start"
        self.peaks: dict[str, float] = {}
        self.ends: dict[str, float] = {}
        self.seconds: dict[str, float] = {}
        self.killed_at_mb: float | None = None
        self.notes: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def sample(self) -> float:
        rss = tree_rss_mb(self.pid)
        self.peaks[self.phase] = max(self.peaks.get(self.phase, 0.0), rss)
        if self.limit_mb is not None and rss > self.limit_mb and self.killed_at_mb is None:
            self.killed_at_mb = rss  # protects the machine: the server and its children are stopped
            for member in process_tree(self.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(member, signal.SIGKILL)
        return rss

    @contextmanager
    def running(self) -> Iterator[None]:
        self._thread.start()
        try:
            yield
        finally:
            self._stop.set()
            self._thread.join()

    @contextmanager
    def during(self, phase: str) -> Iterator[None]:
        """Samples taken inside belong to `phase`; its resident memory at the end is kept too."""
        self.phase = phase
        start = time.perf_counter()
        yield
        self.seconds[phase] = time.perf_counter() - start
        self.ends[phase] = self.sample()

    def report(self) -> dict[str, Any]:
        return {
            "phases": [
                {"phase": p, "peak_mb": self.peaks[p], "end_mb": self.ends.get(p), "seconds": self.seconds.get(p)}
                for p in self.peaks
            ],
            "killed_at_mb": self.killed_at_mb,
            "peak_mb": max(self.peaks.values()),
            "server_vm_hwm_mb": status_mb(self.pid, "VmHWM"),
        }


# -- baseline ----------------------------------------------------------------------------------------------------


def import_footprint_mb(modules: str) -> float:
    """Peak resident memory (VmHWM) of a fresh Python that imports `modules` (comma-separated), in MB."""
    code = f"import {modules}\nimport os\nfrom bench.app_memory import status_mb\n"
    code += "print(status_mb(os.getpid(), 'VmHWM'))"
    out = subprocess.run([sys.executable, "-c", code], cwd=common.REPO, capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def bare_streamlit_mb(browser: Browser, scratch: Path) -> float:
    """Peak tree memory of `streamlit run` on an empty script, once a browser session has run it."""
    script = scratch / "empty.py"
    script.write_text("")
    with streamlit_server(scratch / "bare_workspace", scratch / "bare.log", str(script)) as (url, process):
        sampler = TreeSampler(process.pid)
        with sampler.running():
            page = browser.new_page()
            page.goto(url)
            page.wait_for_timeout(3000)
            page.close()
    return sampler.report()["peak_mb"]


HEADLESS_DEMO = """
import json, os, sys, tempfile
from bench.app_memory import status_mb
from prisma_core import demo
from prisma_core.store import Workspace
marks, last = [["imports", status_mb(os.getpid(), "VmRSS")]], [None]
def progress(update):
    if update.stage != last[0]:
        marks.append([f"{update.stage} begins", status_mb(os.getpid(), "VmRSS")])
        last[0] = update.stage
config = demo.DemoConfig(corpus="mtsamples", n_documents=int(sys.argv[1]), local_file=sys.argv[2])
demo.run_demo(Workspace(tempfile.mkdtemp(prefix="prisma_headless_")), config, progress)
marks.append(["done", status_mb(os.getpid(), "VmRSS")])
print(json.dumps({"stages": marks, "peak_mb": status_mb(os.getpid(), "VmHWM")}))
"""


def headless_demo(n_docs: int) -> dict[str, Any]:
    """The demo in one fresh Python process without a server: resident MB as each stage begins, and the peak."""
    local = str(common.CORPORA_DIR / "mtsamples.parquet")
    command = [sys.executable, "-c", HEADLESS_DEMO, str(n_docs), local]
    out = subprocess.run(command, cwd=common.REPO, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def baseline(browser: Browser, scratch: Path, demo_docs: int) -> dict[str, Any]:
    return {
        "headless_demo": headless_demo(demo_docs),
        "bare_streamlit_mb": bare_streamlit_mb(browser, scratch),
        "imports_together_mb": import_footprint_mb(TOGETHER),
        "python_mb": import_footprint_mb("sys"),
        "imports_alone_mb": {name: import_footprint_mb(name) for name in LIBRARIES if _installed(name)},
    }


def _installed(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


# -- scenarios ---------------------------------------------------------------------------------------------------


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


ALL_PAGES = ["Home", "Datasets", "Embeddings", "Train SAE", "Features", "Families", "Labels", "Explore", "Glossary"]
WALK_TARGET_MB = 1000


def every_page(page: Page, sampler: TreeSampler, when: str) -> None:
    for title in ALL_PAGES:
        with sampler.during(f"{when}: {title}"):
            go(page, title)
            if title == "Families":
                page.frame_locator("iframe[title='streamlit_agraph.agraph']").locator("canvas").first.wait_for(
                    timeout=PAGE_MS
                )


def label_every_feature(page: Page, ollama_url: str) -> None:
    """Labels page: the loopback server, every feature (then every family and theme), Start, until the outcome."""
    go(page, "Labels")
    host = page.get_by_label("Ollama server", exact=True)
    host.fill(ollama_url)
    host.press("Enter")
    settle(page)
    page.get_by_test_id("stRadioGroup").get_by_text("All features", exact=True).click()  # the scope, not a caption
    settle(page)
    page.get_by_role("button", name="Start").click()
    expect(page.get_by_text("labelled by", exact=False).first).to_be_visible(timeout=LONG_WORK_MS)
    settle(page)


def compare_and_download(page: Page, folder: Path) -> list[str]:
    """Explore: Compare groups (the first metadata column), then every download; returns the files' names."""
    go(page, "Explore")
    page.get_by_role("tab", name="Compare groups").click()
    settle(page)
    expect(page.get_by_text("What sets each group apart", exact=False)).to_be_visible(timeout=PAGE_MS)
    page.get_by_role("tab", name="Downloads").click()
    settle(page)
    names = []
    buttons = page.locator("[data-testid=stDownloadButton] button")
    for index in range(buttons.count()):  # every download the tab offers
        with page.expect_download(timeout=LONG_WORK_MS) as download:
            buttons.nth(index).click()
        target = folder / download.value.suggested_filename
        download.value.save_as(target)
        names.append(target.name)
    return names


def walk_session(page: Page, sampler: TreeSampler, csv: Path, n_docs: int, ollama_url: str, folder: Path) -> None:
    demo_session(page, sampler)
    every_page(page, sampler, "after the demo")
    upload_session(page, sampler, csv, n_docs, pages=[])
    every_page(page, sampler, "after training")
    with sampler.during("label every feature, family and theme"):
        label_every_feature(page, ollama_url)
    with sampler.during("compare groups and every download"):
        sampler.notes["downloads"] = ", ".join(compare_and_download(page, folder))
    every_page(page, sampler, "at the end")


def run_walk(baseline_app: Path | None, quick: bool, shipped_demo: bool = False) -> dict[str, Any]:
    """The whole walk in one server, for this checkout and then (when given) the baseline checkout's app; the demo
    is MTSamples read from the shared corpora, or with `shipped_demo` the notes shipped with Prisma (the one-click
    demo a new user runs)."""
    sys.path.append(str(common.REPO / "tests" / "helpers"))  # the tests' loopback Ollama
    from ollama_server import running_fake_ollama

    demo_docs, upload_docs = (QUICK_DEMO_DOCS, QUICK_UPLOAD_DOCS) if quick else (DEMO_DOCS, UPLOAD_DOCS)
    env = {"PRISMA_DEMO_FILE": str(common.CORPORA_DIR / "mtsamples.parquet"), "PRISMA_DEMO_DOCS": str(demo_docs)}
    if shipped_demo:
        demo_docs = min(demo_docs, sample_size())
        env = {"PRISMA_DEMO_FILE": "", "PRISMA_DEMO_DOCS": str(demo_docs)}
    apps = [("after", common.REPO)] + ([("before", baseline_app)] if baseline_app else [])
    sessions = {}
    with (
        tempfile.TemporaryDirectory(prefix="prisma_app_walk_") as folder,
        chromium() as browser,
        running_fake_ollama() as ollama,
    ):
        scratch = Path(folder)
        csv = upload_csv(scratch / f"documents_{upload_docs}.csv", upload_docs)
        for name, app in apps:
            downloads = scratch / f"{name}_downloads"
            downloads.mkdir()

            def drive(page: Page, sampler: TreeSampler, downloads: Path = downloads) -> None:
                walk_session(page, sampler, csv, upload_docs, ollama.url, downloads)

            sessions[name] = scenario(browser, scratch, f"walk_{name}", drive, app_dir=app, **env) | {
                "app": str(app),
                "label_tables": label_tables(scratch / f"walk_{name}_workspace"),
            }
            print(f"{name}: {json.dumps(sessions[name], default=float)}", file=sys.stderr, flush=True)
    return {"device": common.device_report(), "demo_docs": demo_docs, "upload_docs": upload_docs, "sessions": sessions}


def label_tables(workspace: Path) -> dict[str, dict[str, float]]:
    """Rows, version and size on disk (MB) of the tables labelling writes, once the walk is over."""
    from prisma_core.store import Workspace

    db = Workspace(workspace).db
    tables = {}
    for name in ("interpretations", "families", "themes"):
        table = db.open_table(name)
        size = sum(f.stat().st_size for f in (workspace / "lancedb" / f"{name}.lance").rglob("*") if f.is_file())
        tables[name] = {"rows": table.count_rows(), "version": table.version, "mb": size / 1e6}
    return tables


def markdown_walk(result: dict[str, Any]) -> str:
    sessions = result["sessions"]
    phases = list(dict.fromkeys(p["phase"] for s in sessions.values() for p in s["phases"]))

    def peak(session: dict[str, Any], phase: str) -> Any:
        return next((p["peak_mb"] for p in session["phases"] if p["phase"] == phase), "-")

    table = common.markdown_table(
        ["Phase", *[f"{name} peak MB" for name in sessions]],
        [[phase, *[peak(s, phase) for s in sessions.values()]] for phase in phases],
    )
    summary = common.markdown_table(
        ["App", "Peak MB (server + children)", "Target MB", "Verdict", "Server VmHWM MB"],
        [
            [
                name,
                s["peak_mb"],
                WALK_TARGET_MB,
                common.verdict(s["peak_mb"], WALK_TARGET_MB, higher_is_better=False),
                s["server_vm_hwm_mb"],
            ]
            for name, s in sessions.items()
        ],
    )
    tables = common.markdown_table(
        ["App", "Table", "Rows", "Version", "MB on disk"],
        [
            [name, table, t["rows"], t["version"], t["mb"]]
            for name, s in sessions.items()
            for table, t in s["label_tables"].items()
        ],
    )
    return (
        f"The whole walk in one server: the {result['demo_docs']}-note demo, {result['upload_docs']:,} uploaded "
        f"documents, every feature labelled.\n\n{summary}\n\n{table}\n\nThe label tables at the end:\n\n{tables}"
    )


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
            drive(page, sampler)
            page.close()
            return sampler.report() | {"notes": sampler.notes}


def run(quick: bool = False) -> dict[str, Any]:
    demo_docs, upload_docs = (QUICK_DEMO_DOCS, QUICK_UPLOAD_DOCS) if quick else (DEMO_DOCS, UPLOAD_DOCS)
    demo_env = {"PRISMA_DEMO_FILE": str(common.CORPORA_DIR / "mtsamples.parquet"), "PRISMA_DEMO_DOCS": str(demo_docs)}
    with tempfile.TemporaryDirectory(prefix="prisma_app_memory_") as folder, chromium() as browser:
        scratch = Path(folder)
        csv = upload_csv(scratch / f"documents_{upload_docs}.csv", upload_docs)
        result = {
            "device": common.device_report(),
            "baseline": baseline(browser, scratch, demo_docs),
            "demo": scenario(browser, scratch, "demo", demo_session, **demo_env) | {"documents": demo_docs},
            "upload": scenario(
                browser, scratch, "upload", lambda page, sampler: upload_session(page, sampler, csv, upload_docs)
            )
            | {"documents": upload_docs},
        }
    return result


def markdown(result: dict[str, Any]) -> str:
    base = result["baseline"]
    rows = [
        [f"{label} ({result[key]['documents']:,} documents)", phase["phase"], phase["peak_mb"], phase["end_mb"]]
        for key, label in [("demo", "Demo"), ("upload", "Uploaded CSV")]
        for phase in result[key]["phases"]
    ]
    table = common.markdown_table(["Session", "Phase", "Peak MB (server + children)", "MB at the end"], rows)
    summary = common.markdown_table(
        ["Session", "Peak MB", "Target MB", "Verdict", "Server VmHWM MB", "Above bare streamlit MB"],
        [
            [
                key,
                result[key]["peak_mb"],
                TARGETS_MB[key],
                common.verdict(result[key]["peak_mb"], TARGETS_MB[key], higher_is_better=False),
                result[key]["server_vm_hwm_mb"],
                result[key]["peak_mb"] - base["bare_streamlit_mb"],
            ]
            for key in TARGETS_MB
        ],
    )
    stages = ", ".join(f"{stage} {mb:.0f}" for stage, mb in base["headless_demo"]["stages"])
    alone = ", ".join(f"{name} {mb - base['python_mb']:.0f}" for name, mb in base["imports_alone_mb"].items())
    return (
        f"{summary}\n\n{table}\n\nBaseline from the same run: a bare `streamlit run` of an empty script peaks at "
        f"{base['bare_streamlit_mb']:.0f} MB; a Python that imports {TOGETHER} at {base['imports_together_mb']:.0f} "
        f"MB (Python alone {base['python_mb']:.0f} MB). Each library imported alone adds (MB): {alone}. The same demo "
        f"in one Python process without a server (MB resident as each stage begins): {stages}; peak "
        f"{base['headless_demo']['peak_mb']:.0f} MB."
    )


# -- an existing workspace ---------------------------------------------------------------------------------------

WORKSPACE_PAGES = ["Home", "Datasets", "Embeddings", "Train SAE", "Features", "Families", "Labels", "Explore"]
WORKSPACE_TABS = ["Search", "Concept query", "Compare groups", "Map", "Downloads"]
WORKSPACE_PAGE_MS = 300_000  # a page still busy after 5 minutes is recorded as timed out and the visit goes on
WORKSPACE_LIMIT_MB = 9_000  # above this the server is stopped, so the machine (shared) stays usable
SEARCH_QUERY = "the patient was admitted with chest pain"
REFRACT_ID = "doc123"
ERRORS = "[data-testid=stException], [data-testid=stAlertContentError] [data-testid=stMarkdownContainer]"


def workspace_session(page: Page, sampler: TreeSampler, url: str, count: bool = True) -> None:
    """Every page, the Explore tabs, counting tokens, a search and a refraction; a page that fails or times out is
    recorded and the visit goes on (the server may have been stopped for its memory)."""
    steps = [("first page", lambda: first_page(page, url))]
    steps += [(title, lambda title=title: visit(page, title)) for title in WORKSPACE_PAGES[:3]]
    if count:
        steps.append(("Embeddings: count tokens", lambda: count_tokens(page)))
    steps += [(title, lambda title=title: visit(page, title)) for title in WORKSPACE_PAGES[3:8]]
    steps.append(("Explore: refract a document", lambda: refract_by_id(page)))
    for tab in WORKSPACE_TABS:
        steps.append((f"Explore: {tab}", lambda tab=tab: explore_tab(page, tab)))
        if tab == "Search":
            steps.append(("Explore: search", lambda: search(page)))
    steps.append(("Glossary", lambda: visit(page, "Glossary")))
    for phase, step in steps:
        if sampler.killed_at_mb is not None:
            break
        with sampler.during(phase):
            try:
                step()
                errors = page.locator(ERRORS)
                if errors.count():
                    sampler.notes[phase] = " ".join(errors.first.inner_text().split())[:200]
            except PlaywrightError as error:
                sampler.notes[phase] = str(error).splitlines()[0][:200]
        if sampler.killed_at_mb is not None:
            sampler.notes[phase] = f"server stopped at {sampler.killed_at_mb:,.0f} MB"


def first_page(page: Page, url: str) -> None:
    page.goto(url)
    page.get_by_role("heading", name="Prisma", exact=True).wait_for(timeout=WORKSPACE_PAGE_MS)
    settle(page, WORKSPACE_PAGE_MS)


def visit(page: Page, title: str) -> None:
    go(page, title, WORKSPACE_PAGE_MS)
    if title == "Families":
        canvas = page.frame_locator("iframe[title='streamlit_agraph.agraph']").locator("canvas").first
        canvas.wait_for(timeout=WORKSPACE_PAGE_MS)


def count_tokens(page: Page) -> None:
    go(page, "Embeddings", WORKSPACE_PAGE_MS)
    page.get_by_text("Token statistics: how documents split into windows").click()
    page.get_by_text("Count tokens").click()
    settle(page, WORKSPACE_PAGE_MS)
    page.get_by_text("Windows per document").wait_for(timeout=WORKSPACE_PAGE_MS)


def refract_by_id(page: Page) -> None:
    """Refract a document: type its id where the app asks for one, else the document picker's first choice."""
    page.get_by_role("tab", name="Refract").click()
    settle(page, WORKSPACE_PAGE_MS)
    typed = page.get_by_role("textbox", name="Document id")
    if typed.count():
        typed.fill(REFRACT_ID)
        typed.press("Enter")
        settle(page, WORKSPACE_PAGE_MS)
    page.get_by_text("concepts that matter most here").wait_for(timeout=WORKSPACE_PAGE_MS)


def explore_tab(page: Page, tab: str) -> None:
    page.get_by_role("tab", name=tab).click()
    settle(page, WORKSPACE_PAGE_MS)


def search(page: Page) -> None:
    box = page.get_by_label("Search documents")
    box.fill(SEARCH_QUERY)
    box.press("Enter")
    settle(page, WORKSPACE_PAGE_MS)
    page.get_by_text("Read a whole document").wait_for(timeout=WORKSPACE_PAGE_MS)


def open_workspace(
    browser: Browser, scratch: Path, name: str, workspace: Path, app_dir: Path, env: dict[str, str], count: bool
) -> dict[str, Any]:
    """workspace_session on `workspace` with the app of `app_dir` (counting tokens when `count`): the memory report,
    with notes per phase."""
    with streamlit_server(workspace, scratch / f"{name}.log", app_dir=app_dir, **env) as (url, process):
        sampler = TreeSampler(process.pid, limit_mb=WORKSPACE_LIMIT_MB)
        with sampler.running():
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            workspace_session(page, sampler, url, count)
            page.close()
            return sampler.report() | {"notes": sampler.notes, "app": str(app_dir)}


def run_workspace(workspace: Path, baseline_app: Path | None, env: dict[str, str], count: bool) -> dict[str, Any]:
    """The app on an existing workspace: this checkout's, then the baseline checkout's (when given), same run. The
    app before the bounded path tokenizes every document when counting tokens (`count`) and at a million documents
    outgrows the memory limit there, which ends its visit: leave it out to see the other pages."""
    from prisma_core.store import Workspace

    dataset = Workspace(workspace).datasets()[-1]
    apps = [("after", common.REPO)] + ([("before", baseline_app)] if baseline_app else [])
    with tempfile.TemporaryDirectory(prefix="prisma_app_memory_") as folder, chromium() as browser:
        sessions = {}
        for name, app in apps:
            sessions[name] = open_workspace(browser, Path(folder), name, workspace, app, env, count)
            print(f"{name}: {json.dumps(sessions[name], default=float)}", file=sys.stderr, flush=True)  # partial record
    return {
        "device": common.device_report(),
        "workspace": str(workspace),
        "documents": dataset.n_documents,
        "env": env,
        "count_tokens": count,
        "sessions": sessions,
    }


def markdown_workspace(result: dict[str, Any]) -> str:
    sessions = result["sessions"]
    phases = list(dict.fromkeys(p["phase"] for s in sessions.values() for p in s["phases"]))

    def cells(session: dict[str, Any], phase: str) -> list[Any]:
        found = next((p for p in session["phases"] if p["phase"] == phase), None)
        if found is None:
            return ["-", "-"]
        note = session["notes"].get(phase)
        seconds = f"{found['seconds']:.0f}" if found["seconds"] is not None else "-"
        return [found["peak_mb"], seconds + (f" ({note})" if note else "")]

    header = ["Page"] + [f"{name} {what}" for name in sessions for what in ("peak MB", "s")]
    rows = [[phase, *[c for s in sessions.values() for c in cells(s, phase)]] for phase in phases]
    killed = [f"{n}: stopped at {s['killed_at_mb']:.0f} MB" for n, s in sessions.items() if s["killed_at_mb"]]
    totals = ", ".join(
        f"{n} {s['peak_mb']:.0f} MB (server VmHWM {s['server_vm_hwm_mb']:.0f})" for n, s in sessions.items()
    )
    return (
        f"{result['documents']:,} documents ({result['workspace']}). Peak of the server and its children: {totals}."
        + (" " + "; ".join(killed) + "." if killed else "")
        + "\n\n"
        + common.markdown_table(header, rows)
    )


def main() -> None:
    arguments = common.parser(__doc__.splitlines()[0])
    arguments.add_argument("--workspace", type=Path, help="open this existing workspace and visit every page")
    arguments.add_argument(
        "--baseline-app", type=Path, help="with --workspace or --walk: another checkout's app, visited next"
    )
    arguments.add_argument("--large-dataset", help="with --workspace: PRISMA_LARGE_DATASET for the server")
    arguments.add_argument("--skip-token-count", action="store_true", help="with --workspace: do not count tokens")
    arguments.add_argument("--walk", action="store_true", help="the whole walk, labelling included, in one server")
    arguments.add_argument(
        "--shipped-demo", action="store_true", help="with --walk: the demo on the notes shipped with Prisma"
    )
    args = arguments.parse_args()
    if args.walk:
        walk = run_walk(args.baseline_app, args.quick, args.shipped_demo)
        common.publish(f"{NAME}_walk" + ("_shipped_demo" if args.shipped_demo else ""), walk, args, markdown_walk)
        return
    if args.workspace is None:
        common.publish(NAME, run(args.quick), args, markdown)
        return
    env = {"PRISMA_LARGE_DATASET": args.large_dataset} if args.large_dataset else {}
    result = run_workspace(args.workspace, args.baseline_app, env, not args.skip_token_count)
    common.publish(f"{NAME}_workspace", result, args, markdown_workspace)


if __name__ == "__main__":
    main()
