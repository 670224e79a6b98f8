"""What a first view imports, each case in a fresh interpreter: LanceDB without the REST client of Lance namespaces
(prisma_core/store/lancedb_import.py; the deferral only acts before anything imported LanceDB), the document readers
without their file libraries."""

import json
import subprocess
import sys
import textwrap

import pytest


def run_fresh(code: str, tmp_path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def prisma_path(monkeypatch):
    from pathlib import Path

    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))


def test_a_workspace_opens_reads_and_writes_without_the_rest_client(tmp_path, prisma_path):
    seen = run_fresh(
        f"""
        import json, sys
        from prisma_core import pipeline
        from prisma_core.store import Workspace
        workspace = Workspace({str(tmp_path / "ws")!r})
        upload = ("notes.csv", b"text\\none note about the heart\\nanother note about the knee\\n")
        dataset_id, _ = pipeline.ingest(workspace, [upload], "notes")
        again = Workspace({str(tmp_path / "ws")!r})
        print(json.dumps({{
            "api_loaded": "lance_namespace_urllib3_client.api" in sys.modules,
            "names": [d.name for d in again.datasets()],
            "texts": again.documents(dataset_id)["text"].tolist(),
        }}))
        """,
        tmp_path,
    )
    texts = ["one note about the heart", "another note about the knee"]
    assert seen == {"api_loaded": False, "names": ["notes"], "texts": texts}


def test_the_rest_client_still_loads_when_something_asks_for_it(tmp_path, prisma_path):
    seen = run_fresh(
        f"""
        import json, sys
        from prisma_core.store import Workspace
        Workspace({str(tmp_path / "ws")!r})
        before = "lance_namespace_urllib3_client.api" in sys.modules
        import lance_namespace_urllib3_client
        client = lance_namespace_urllib3_client.ApiClient
        print(json.dumps({{"before": before, "after": "lance_namespace_urllib3_client.api" in sys.modules,
                           "client": client.__name__}}))
        """,
        tmp_path,
    )
    assert seen == {"before": False, "after": True, "client": "ApiClient"}


def test_the_document_readers_import_their_file_libraries_on_first_use(tmp_path, prisma_path):
    """Every view imports the ingest package; the Excel, PDF and Word libraries (0.35 s) wait for such a file."""
    seen = run_fresh(
        """
        import json, sys
        from prisma_core.ingest import IngestConfig, read_file
        before = sorted(m for m in ("openpyxl", "pypdf", "docx") if m in sys.modules)
        try:
            read_file("broken.pdf", b"not a pdf", IngestConfig(), [])
        except Exception as error:
            message = str(error)
        print(json.dumps({"before": before, "pdf": "pypdf" in sys.modules, "message": message}))
        """,
        tmp_path,
    )
    assert seen["before"] == [] and seen["pdf"]
    assert seen["message"].startswith("broken.pdf: is not a readable PDF")


def test_what_every_view_imports_leaves_the_libraries_of_single_tasks_out(tmp_path, prisma_path):
    """The read model, the pipeline and the demo (what Home imports) import no library that only one task needs:
    networkx (families), scipy.optimize (carrying edits), scikit-learn, torch, the file readers' libraries."""
    seen = run_fresh(
        f"""
        import json, sys
        import prisma_core.pipeline, prisma_core.pipeline.demo, prisma_core.pipeline.read_model
        import prisma_core.reading.runs, prisma_core.reading.overview, prisma_core.reading.explore
        from prisma_core.store import Workspace
        Workspace({str(tmp_path / "ws")!r})
        single = ("networkx", "scipy.optimize", "sklearn", "torch", "openpyxl", "pypdf", "docx")
        print(json.dumps(sorted(name for name in single if name in sys.modules)))
        """,
        tmp_path,
    )
    assert seen == []
