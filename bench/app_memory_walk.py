"""The analyst's whole walk in ONE server (`python -m bench.app_memory --walk`): the demo, every page, an upload
trained, every feature labelled by the tests' loopback Ollama, four edits (a theme renamed, two merged, a feature
hidden, a family pinned), Compare groups and every download (the report included), the dataset trained again (the
edits carried), every page again; the peak memory of each phase (what Streamlit Community Cloud's 1 GB must
hold)."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect

from bench import common
from bench.app_driver import PAGE_MS, chromium, go, settle
from bench.app_sessions import (
    DEMO_DOCS,
    LONG_WORK_MS,
    QUICK_DEMO_DOCS,
    QUICK_UPLOAD_DOCS,
    UPLOAD_DOCS,
    demo_session,
    make_edit,
    scenario,
    train_again,
    upload_csv,
    upload_session,
)
from bench.memory_sampler import TreeSampler
from prisma_core.pipeline.demo import sample_size

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
    with sampler.during("edits: a theme renamed, two merged, a feature hidden, a family pinned"):
        go(page, "Features")
        make_edit(page, "theme", "rename", name="My theme")
        make_edit(page, "theme", "merge")
        make_edit(page, "feature", "hide")
        make_edit(page, "family", "pin")
    with sampler.during("compare groups and every download (the report included)"):
        sampler.notes["downloads"] = ", ".join(compare_and_download(page, folder))
    with sampler.during("train again (the edits carried to the new run)"):
        train_again(page)
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
