"""End to end through the command line, on the whole BBC corpus (2,225 articles) with the default settings."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]


def prisma(*args: str, workspace: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "prisma_core", *args, "--workspace", str(workspace)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1800,
    )


@pytest.fixture(scope="module")
def bbc_run(bbc_workspace, corpora_dir, tmp_path_factory):
    """`run` re-ingests the corpus as a new dataset; its embeddings come from the session's cache."""
    workspace, _ = bbc_workspace
    out = tmp_path_factory.mktemp("export")
    result = prisma(
        "run",
        str(corpora_dir / "bbc_news.parquet"),
        "--text-column",
        "text",
        "--id-column",
        "id",
        "--out",
        str(out),
        workspace=workspace.path,
    )
    assert result.returncode == 0, result.stderr
    return result, out


def metric(output: str, name: str) -> float:
    value = re.search(rf"{name} ([0-9.]+)(%?)", output)
    assert value, output
    return float(value.group(1)) / (100 if value.group(2) else 1)


def test_run_reports_quality_within_targets(bbc_run):
    result, _ = bbc_run
    assert "2225 documents" in result.stdout
    assert "2225 from cache" in result.stdout
    assert metric(result.stdout, "held-out FVU") <= 0.45
    assert metric(result.stdout, "dead latents") <= 0.05


def test_export_writes_every_file_with_consistent_contents(bbc_run, bbc):
    _, out = bbc_run
    features = pd.read_parquet(out / "features.parquet")
    assert len(features) == 8 * 384
    assert {"feature_id", "density", "label", "description", "family_id", "parent"} <= set(features.columns)
    assert features["label"].notna().all()
    activations = pd.read_parquet(out / "activations.parquet")
    assert activations.groupby("doc_id").size().eq(32).all()
    assert activations["doc_id"].nunique() == 2225
    assert (activations["value"] > 0).all()
    density = activations.groupby("feature_id").size()
    assert (features.set_index("feature_id").loc[density.index, "density"] == density).all()
    documents = pd.read_parquet(out / "documents.parquet")
    assert documents["doc_id"].tolist() == bbc["id"].tolist()
    assert documents["label"].tolist() == bbc["label"].tolist()
    families = json.loads((out / "families.json").read_text())
    assert families and all(f["members"][0] == f["parent"] for f in families)
    children = {e["child"] for f in families for e in f["edges"]}
    in_family = features.dropna(subset=["family_id"])
    assert set(in_family.loc[in_family["parent"].notna(), "feature_id"]) <= children
    config = json.loads((out / "config.json").read_text())
    assert config["config"]["sae"]["seed"] == 0 and config["config"]["sae"]["k"] == 32
    assert (out / "sae.safetensors").stat().st_size > 8 * 384 * 384 * 4


def test_list_shows_the_run(bbc_run, bbc_workspace):
    workspace, _ = bbc_workspace
    listing = prisma("list", workspace=workspace.path)
    assert listing.returncode == 0
    assert "bbc_news" in listing.stdout and "run-" in listing.stdout


def test_bad_input_gives_a_clear_error_and_exit_code(tmp_path):
    garbage = tmp_path / "notes.csv"
    garbage.write_bytes(bytes(range(256)) * 40)
    result = prisma("ingest", str(garbage), workspace=tmp_path / "ws")
    assert result.returncode == 2
    assert result.stderr.startswith("error:") and "notes.csv" in result.stderr
    assert "Traceback" not in result.stderr
    missing = prisma("train", workspace=tmp_path / "ws")
    assert missing.returncode == 2 and "no dataset yet" in missing.stderr


def test_core_never_imports_streamlit():
    code = (
        "import sys, pkgutil, importlib, prisma_core\n"
        "for m in pkgutil.walk_packages(prisma_core.__path__, 'prisma_core.'):\n"
        "    if m.name != 'prisma_core.__main__': importlib.import_module(m.name)\n"
        "print('streamlit' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.stdout.strip() == "False", result.stderr
