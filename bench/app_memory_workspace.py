"""The app opened on an existing workspace (`python -m bench.app_memory --workspace PATH`): every page and Explore
tab, counting tokens, a search and a refraction, each with its peak memory and seconds; a page that fails or times
out is recorded and the visit goes on."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, Page
from playwright.sync_api import Error as PlaywrightError

from bench import common
from bench.app_driver import chromium, go, settle, streamlit_server
from bench.memory_sampler import TreeSampler

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
