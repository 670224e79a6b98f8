"""End to end through the command line, on the whole BBC corpus (2,225 articles) with the default settings."""

import json
import re
import subprocess
import sys

import pandas as pd
import pytest
from reliability_helpers import REPO, run_cli

from prisma_core import pipeline
from prisma_core.cli import main as cli_main
from prisma_core.sae import SAEConfig


@pytest.fixture(scope="module")
def bbc_run(bbc_workspace, corpora_dir, tmp_path_factory):
    """`run` re-ingests the corpus as a new dataset; its embeddings come from the session's cache."""
    workspace, _ = bbc_workspace
    out = tmp_path_factory.mktemp("export")
    result = run_cli(
        "run",
        str(corpora_dir / "bbc_news.parquet"),
        "--text-column",
        "text",
        "--id-column",
        "id",
        "--out",
        str(out),
        workspace=workspace.path,
        timeout=1800,
    )
    assert result.returncode == 0, result.stderr
    return result, out


def metric(output: str, name: str) -> float:
    value = re.search(rf"{name} ([0-9.]+)(%?)", output)
    assert value, output
    return float(value.group(1)) / (100 if value.group(2) else 1)


@pytest.fixture(scope="module")
def suggested(bbc_run, bbc_workspace) -> SAEConfig:
    """The settings suggested for the dataset `run` created: the CLI's defaults suit the corpus (its size and
    passages)."""
    workspace, _ = bbc_workspace
    _, out = bbc_run
    return pipeline.suggested_sae_config(workspace, json.loads((out / "config.json").read_text())["dataset_id"])


def test_run_reports_quality_within_targets(bbc_run, suggested):
    result, _ = bbc_run
    assert "2225 documents" in result.stdout
    assert re.search(r"theme 0: .+ \((\d+) documents\)", result.stdout)
    assert "2225 from cache" in result.stdout
    assert metric(result.stdout, "held-out FVU") <= metric(result.stdout, "train FVU") + 0.10
    assert metric(result.stdout, "dead latents") <= 0.05
    trained, compared = suggested.n_features, suggested.n_trainings
    kept = re.search(
        rf"features: (\d+) kept of {trained} per training, found in most of {compared} trainings; (\d+) in all "
        rf"{compared}",
        result.stdout,
    )
    assert kept and 0 < int(kept.group(2)) <= int(kept.group(1)) <= trained


def test_export_writes_every_file_with_consistent_contents(bbc_run, bbc, suggested):
    _, out = bbc_run
    features = pd.read_parquet(out / "features.parquet")
    config = json.loads((out / "config.json").read_text())
    assert len(features) == config["metrics"]["features_kept"] <= suggested.n_features
    columns = {"feature_id", "density", "found_in", "background", "label", "description", "family_id", "theme_id"}
    assert columns <= set(features.columns)
    compared = suggested.n_trainings
    assert set(features["found_in"]) <= set(range(suggested.kept_at_least(), compared + 1))
    assert (features["found_in"] == compared).sum() == config["metrics"]["found_in_all"]
    assert (features["background"] == (features["density_fraction"] >= 0.5)).all()
    assert features["label"].notna().all()
    activations = pd.read_parquet(out / "activations.parquet")
    assert activations.groupby("doc_id").size().le(suggested.k).all()
    assert activations["doc_id"].nunique() == 2225
    assert (activations["value"] > 0).all()
    density = activations.groupby("feature_id").size()
    assert (features.set_index("feature_id").loc[density.index, "density"] == density).all()
    documents = pd.read_parquet(out / "documents.parquet")
    assert documents["doc_id"].tolist() == bbc["id"].tolist()
    assert documents["label"].tolist() == bbc["label"].tolist()
    themes = json.loads((out / "themes.json").read_text())
    assert 3 <= len(themes) <= 50
    assert documents["theme_id"].between(0, len(themes) - 1).all()  # every article has a strongest theme
    assert all(row.theme_id == row.themes[0] for row in documents.itertuples())
    assert sorted(t["theme_id"] for t in themes) == list(range(len(themes)))
    assert len({t["label"] for t in themes}) == len(themes)
    theme_of = features.set_index("feature_id")["theme_id"]
    assert all((theme_of.loc[t["features"]] == t["theme_id"]).all() for t in themes)
    families = json.loads((out / "families.json").read_text())
    assert families and all(f["members"][0] == f["parent"] for f in families)
    children = {e["child"] for f in families for e in f["edges"]}
    in_family = features.dropna(subset=["family_id"])
    assert set(in_family.loc[in_family["parent"].notna(), "feature_id"]) <= children
    sae = config["config"]["sae"]
    assert (sae["seed"], sae["k"], sae["n_features"], sae["n_trainings"]) == (
        0,
        suggested.k,
        suggested.n_features,
        compared,
    )
    assert config["metrics"]["n_themes"] == len(themes)
    assert (out / "sae.safetensors").stat().st_size > len(features) * 384 * 4 * 2


def test_themes_regroup_without_retraining(bbc_run, bbc_workspace):
    workspace, _ = bbc_workspace
    before = pipeline.load_run(workspace)
    result = run_cli("themes", "--n-themes", "4", workspace=workspace.path)
    assert result.returncode == 0, result.stderr
    assert "4 themes" in result.stdout and len(re.findall(r"^  theme \d+: ", result.stdout, re.MULTILINE)) == 4
    after = pipeline.load_run(workspace)
    assert after.record.run_id == before.record.run_id and after.themes.n_themes == 4
    assert (after.codes != before.codes).nnz == 0  # the SAE and its activations are untouched
    assert after.theme_info["n_documents"].sum() >= after.codes.shape[0]  # every document in at least one
    refused = run_cli("themes", "--n-themes", "1", workspace=workspace.path)
    assert refused.returncode == 2 and "n_themes must be a whole number between 2" in refused.stderr
    assert pipeline.load_run(workspace).themes.n_themes == 4  # a refused setting changes nothing


def test_list_shows_the_run(bbc_run, bbc_workspace, suggested):
    workspace, _ = bbc_workspace
    listing = run_cli("list", workspace=workspace.path)
    assert listing.returncode == 0
    assert "bbc_news" in listing.stdout and "run-" in listing.stdout
    kept = pipeline_run_metrics(workspace)["features_kept"]
    assert f"n={kept} k={suggested.k}" in listing.stdout  # the number of features, not "?"


def pipeline_run_metrics(workspace) -> dict:
    return workspace.run_or_latest().metrics


def test_ingest_without_an_id_column_guesses_it_as_the_datasets_page_does(tmp_path, bbc, capsys):
    """Run in this process (`main` is what `python -m prisma_core` runs): a new interpreter costs more than the test."""
    from prisma_core.cli import main
    from prisma_core.store import Workspace

    articles = bbc.head(6)[["id", "text", "label"]]
    articles.to_csv(tmp_path / "news.csv", index=False)
    articles.assign(id=["a", "a", "b", "c", "d", "e"]).to_csv(tmp_path / "repeats.csv", index=False)
    for name in ("news.csv", "repeats.csv"):
        exit_code = main(["ingest", str(tmp_path / name), "--text-column", "text", "--workspace", str(tmp_path / "ws")])
        assert exit_code == 0, capsys.readouterr().err
    news, repeats = Workspace(tmp_path / "ws").datasets()
    stored = Workspace(tmp_path / "ws").documents(news.dataset_id)
    assert stored["doc_id"].tolist() == articles["id"].astype(str).tolist()
    assert "id" not in news.metadata_columns  # the id column became the ids, not metadata
    ids = Workspace(tmp_path / "ws").documents(repeats.dataset_id)["doc_id"].tolist()
    assert ids == ["1", "2", "3", "4", "5", "6"] and "id" in repeats.metadata_columns  # not unique: row numbers


@pytest.mark.slow  # a new Python process
def test_bad_input_gives_a_clear_error_and_exit_code(tmp_path):
    garbage = tmp_path / "notes.csv"
    garbage.write_bytes(bytes(range(256)) * 40)
    result = run_cli("ingest", str(garbage), workspace=tmp_path / "ws")
    assert result.returncode == 2
    assert result.stderr.startswith("error:") and "notes.csv" in result.stderr
    assert "Traceback" not in result.stderr
    missing = run_cli("train", workspace=tmp_path / "ws")
    assert missing.returncode == 2 and "no dataset yet" in missing.stderr


@pytest.mark.slow  # a new Python process
def test_core_never_imports_streamlit():
    code = (
        "import sys, pkgutil, importlib, prisma_core\n"
        "for m in pkgutil.walk_packages(prisma_core.__path__, 'prisma_core.'):\n"
        "    if m.name != 'prisma_core.__main__': importlib.import_module(m.name)\n"
        "print('streamlit' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.stdout.strip() == "False", result.stderr


HEAVY = ("torch", "sentence_transformers", "transformers", "openvino", "lancedb")
IMPORTED_AFTER = (
    "import sys\n"
    "from prisma_core.cli import main\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "except SystemExit:\n"
    "    pass\n"
    f"print('IMPORTED', *[m for m in {HEAVY!r} if m in sys.modules])\n"
)


def imported_by(*args: str) -> set[str]:
    """The heavy libraries a fresh process has imported after running the command `args`."""
    result = subprocess.run(
        [sys.executable, "-c", IMPORTED_AFTER, *args], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    return set(result.stdout.strip().splitlines()[-1].split()[1:])


@pytest.mark.slow  # new Python processes
def test_commands_import_only_the_libraries_they_need(tmp_path):
    assert imported_by("--help") == set()
    assert imported_by("train", "--help") == set()
    assert imported_by("list", "--workspace", str(tmp_path / "ws")) == {"lancedb"}


@pytest.mark.slow  # two CLI runs in new processes
def test_warm_run_embeds_nothing_and_loads_no_model(bbc, tmp_path):
    """A second `run` of the same file finds every document and label vector in the workspace's cache: it loads
    no embedding model (neither sentence-transformers nor OpenVINO) and scores its labels as the first run did."""
    from prisma_core.store import Workspace

    bbc.head(60).to_parquet(tmp_path / "bbc60.parquet")
    args = ["run", str(tmp_path / "bbc60.parquet"), "--text-column", "text", "--id-column", "id"]
    args += ["--n-features", "64", "--epochs", "5", "--workspace", str(tmp_path / "ws")]
    assert "torch" in imported_by(*args)  # cold: embeds and trains
    warm = imported_by(*args)
    assert warm.isdisjoint({"sentence_transformers", "transformers", "openvino"}), warm
    workspace = Workspace(tmp_path / "ws")
    cold_run, warm_run = (workspace.runs(dataset.dataset_id)[0] for dataset in workspace.datasets())
    columns = ["feature_id", "label", "score_embedding"]
    cold_labels, warm_labels = (
        workspace.labels.of(run.run_id)[columns].sort_values(columns[:2]).reset_index(drop=True)
        for run in (cold_run, warm_run)
    )
    assert cold_labels["score_embedding"].notna().any()
    pd.testing.assert_frame_equal(cold_labels, warm_labels)
    # reading a run (here: exporting it, as the app's pages read it) needs no torch: the SAE is read as numpy arrays
    assert imported_by("export", "--workspace", str(tmp_path / "ws"), "--out", str(tmp_path / "out")) == {"lancedb"}
    assert (tmp_path / "out" / "sae.safetensors").is_file()
    assert imported_by("report", "--workspace", str(tmp_path / "ws"), "--out", str(tmp_path / "r.html")) == {"lancedb"}
    assert (tmp_path / "r.html").stat().st_size > 10_000


def test_help_names_the_environment_default_of_a_setting_read_from_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli_main(["embed", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    ray_help = help_text.split("--ray-address RAY_ADDRESS", 2)[2].split("--ray-workers")[0]
    assert "$PRISMA_RAY_ADDRESS by default" in ray_help and "(default: None)" not in ray_help
    assert "(default: 16)" in help_text  # a plain default is still shown (the embedding batch size)


@pytest.mark.parametrize(("command", "offered"), [("train", False), ("embed", True), ("run", True)])
def test_only_commands_that_embed_a_dataset_offer_the_ray_settings(
    command: str, offered: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ray runs the embedding of a dataset only: `train` (stored vectors, keyword labels embedded here) has no
    --ray-address or --ray-workers and refuses them."""
    with pytest.raises(SystemExit):
        cli_main([command, "--help"])
    help_text = capsys.readouterr().out
    assert ("--ray-address" in help_text, "--ray-workers" in help_text) == (offered, offered)
    assert "--embed-batch-size" in help_text or command == "embed"  # train keeps its other embedding settings
    if not offered:
        with pytest.raises(SystemExit) as refused:
            cli_main([command, "--ray-address", "auto"])
        assert refused.value.code == 2 and "unrecognized arguments: --ray-address" in capsys.readouterr().err
