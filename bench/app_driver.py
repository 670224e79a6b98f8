"""Drive the real app in a browser: a fresh `streamlit run` server on its own port and workspace, headless Debian
Chromium through Playwright, and the waits a person's clicks need. Shared by the browser tests and bench/app_memory.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Browser, Locator, Page, sync_playwright

REPO = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
PAGE_MS = 60_000
START_S = 120


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def streamlit_server(
    workspace: Path,
    log_path: Path,
    script: str = "app.py",
    unset: Sequence[str] = (),
    app_dir: Path = REPO,
    **env: str,
) -> Iterator[tuple[str, subprocess.Popen]]:
    """A fresh `streamlit run <script>` process on its own port and workspace, its output in log_path, with this
    process's environment less the variables named in `unset`, the settings scripts/app.sh makes, plus `env`; yields
    (url, process) once the server answers its health check. `app_dir`: the checkout whose app it runs (another
    commit's, for a baseline)."""
    port = free_port()
    inherited = {name: value for name, value in os.environ.items() if name not in unset}
    as_app_sh_starts_it = {"HF_HUB_OFFLINE": "1", "MALLOC_ARENA_MAX": os.environ.get("MALLOC_ARENA_MAX", "2")}
    environment = inherited | {"PRISMA_WORKSPACE": str(workspace)} | as_app_sh_starts_it | env
    with log_path.open("w") as log:
        command = [sys.executable, "-m", "streamlit", "run", script, "--server.headless", "true"]
        process = subprocess.Popen(
            [*command, "--server.port", str(port)], cwd=app_dir, env=environment, stdout=log, stderr=subprocess.STDOUT
        )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_healthy(url, log_path)
            yield url, process
        finally:
            process.terminate()
            process.wait(timeout=30)


def wait_until_healthy(url: str, log_path: Path) -> None:
    deadline = time.time() + START_S
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"streamlit did not start; see {log_path}")


@contextmanager
def chromium() -> Iterator[Browser]:
    executable = shutil.which("chromium")
    assert executable, "Debian chromium is required (scripts/setup.sh dev installs it)"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def settle(page: Page, timeout_ms: int = PAGE_MS) -> None:
    """Wait until the script run is over and every element has rendered."""
    page.wait_for_selector("[data-testid=stMain] [data-testid=stElementContainer]", timeout=timeout_ms)
    busy = "[data-testid=stStatusWidget], [data-testid=stSkeleton]"
    page.wait_for_function(f"!document.querySelector('{busy}')", timeout=timeout_ms)
    page.wait_for_timeout(800)


def go(page: Page, title: str, timeout_ms: int = PAGE_MS) -> None:
    page.locator("[data-testid=stSidebar] [data-testid=stPageLink]").get_by_text(title, exact=True).click()
    settle(page, timeout_ms)


def open_expander(page: Page, title: str) -> Locator:
    """The expander whose title holds `title`, opened when it is folded (one click on its title)."""
    expander = page.get_by_test_id("stExpander").filter(has_text=title).first
    if expander.locator("details").get_attribute("open") is None:
        expander.locator("summary").click()
        settle(page)
    return expander
