"""The `label` and `score` commands on a real run, against the loopback fake Ollama."""

import re

import pandas as pd
import pytest
from labelling_run import active_features
from ollama_server import closed_port_url
from reliability_helpers import run_cli

from prisma_core import pipeline
from prisma_core.cli import main
from prisma_core.interpret.keywords import KEYWORD_SOURCE
from prisma_core.interpret.label_choice import weaker


@pytest.mark.slow  # the CLI labels, scores and exports a run
def test_cli_label_score_and_export(workspace, base_run, fake, tmp_path, capsys):
    features = active_features(workspace, base_run.run_id)
    density = workspace.feature_stats.of(base_run.run_id).set_index("feature_id")["density"]
    chosen = sorted(features, key=lambda f: -density[f])[:3]
    listed = ",".join(map(str, chosen))

    n_families = len(workspace.groups.families(base_run.run_id))
    labelled = run_cli(
        "label", "--ollama-host", fake.url, "--model", "llama3.2", "--features", listed, "--families",
        workspace=workspace.path,
    )  # fmt: skip
    unreachable = main(["label", "--ollama-host", closed_port_url(), "--workspace", str(workspace.path)])
    scored = run_cli("score", "--detect", "--ollama-host", fake.url, "--model", "llama3.2", workspace=workspace.path)

    assert labelled.returncode == 0, labelled.stderr
    assert f"features: 3 labelled by llama3.2 at {fake.url}, 0 already labelled by it, 0 failed" in labelled.stdout
    assert f"families: {n_families} labelled by llama3.2" in labelled.stdout
    kept = [f for f in workspace.groups.families(base_run.run_id) if f.label_source != "llama3.2"]
    for family in kept:  # a family keeps its name only where the model's scored worse, and the command says so
        assert family.label_source == KEYWORD_SOURCE and f"Family {family.family_id} keeps “" in labelled.stdout
    assert unreachable == 2  # main() is what `python -m prisma_core` exits with; in-process saves an import
    assert "error: Ollama is not reachable at http://127.0.0.1:" in capsys.readouterr().err
    assert scored.returncode == 0, scored.stderr
    assert "detection by llama3.2: 3 labels scored, 0 failed" in scored.stdout
    assert re.search(rf"keywords: {len(density)} labels, mean embedding score 0\.\d+", scored.stdout)
    pipeline.export_run(workspace, None, tmp_path / "export")
    exported = pd.read_parquet(tmp_path / "export" / "features.parquet").set_index("feature_id")
    stored = workspace.labels.of(base_run.run_id).set_index(["feature_id", "source"])["score_embedding"]
    for feature in chosen:  # the model's label is shown unless it scores worse than the keywords
        model, keywords = stored[(feature, "llama3.2")], stored[(feature, KEYWORD_SOURCE)]
        set_aside = weaker(pd.Series([model]), pd.Series([keywords])).iloc[0]
        assert exported.at[feature, "label_source"] == (KEYWORD_SOURCE if set_aside else "llama3.2")
        assert (f"feature {feature}: The language model named" in labelled.stdout) == set_aside
    assert exported.loc[chosen, "score_embedding"].notna().all()
    assert (
        exported.loc[[f for f in chosen if exported.at[f, "label_source"] == "llama3.2"], "score_detection"]
        .notna()
        .all()
    )
    others = exported.drop(index=chosen)
    assert (others["label_source"] == KEYWORD_SOURCE).all() and others["score_detection"].isna().all()
    assert (exported["label_note"] != "").sum() == sum(f"feature {f}: The language" in labelled.stdout for f in chosen)


def test_cli_never_shows_the_password_of_a_host_url(workspace, base_run, fake, capsys, monkeypatch):
    """Issue 15, item 10: `--ollama-host http://user:PASSWORD@host` printed the password on stdout and in errors."""
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    password = "PASSWORD-s3cr3t"
    feature = str(active_features(workspace, base_run.run_id)[0])
    common = ["--model", "llama3.2", "--features", feature, "--workspace", str(workspace.path)]
    with_password = fake.url.replace("http://", f"http://analyst:{password}@")
    unreachable = closed_port_url().replace("http://", f"http://analyst:{password}@")

    labelled = main(["label", "--ollama-host", with_password, *common])
    scored = main(["score", "--detect", "--ollama-host", with_password, *common])
    refused = main(["label", "--ollama-host", unreachable, "--relabel", *common])
    output = capsys.readouterr()

    assert (labelled, scored, refused) == (0, 0, 2)
    assert f"labelled by llama3.2 at {fake.url}" in output.out
    assert "error: Ollama is not reachable at http://127.0.0.1:" in output.err
    assert password not in output.out + output.err and "analyst" not in output.out + output.err
    assert fake.authorizations and all(header.startswith("Basic ") for header in fake.authorizations)
