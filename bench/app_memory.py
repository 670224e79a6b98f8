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

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser

from bench import common
from bench.app_driver import chromium, streamlit_server
from bench.app_memory_walk import markdown_walk, run_walk
from bench.app_memory_workspace import markdown_workspace, run_workspace
from bench.app_sessions import (
    DEMO_DOCS,
    QUICK_DEMO_DOCS,
    QUICK_UPLOAD_DOCS,
    UPLOAD_DOCS,
    demo_session,
    scenario,
    upload_csv,
    upload_session,
)
from bench.memory_sampler import TreeSampler
from bench.memory_sampler import status_mb as status_mb  # the import footprints below import it from here, as before

NAME = "app_memory"
TITLE = "8. App memory: the demo and a 2,000-document session in a browser"
TARGETS_MB = {"demo": 1000, "upload": 1500}
LIBRARIES = ["torch", "sentence_transformers", "lancedb", "pandas", "sklearn", "scipy", "streamlit", "openvino"]
TOGETHER = "torch, sentence_transformers, lancedb, pandas"


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
from prisma_core.pipeline import demo
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
