"""Stage records: every stage names its parent (dataset -> embedding -> run -> families, themes, labels), and a
rebuild's record is what the run reports from then on."""

from dataclasses import asdict

from prisma_core import pipeline
from prisma_core.embed import EmbedConfig, model_key
from prisma_core.sae import SAEConfig
from prisma_core.themes import ThemeConfig


def test_every_stage_record_names_the_record_it_was_made_from(small_run, tmp_path):
    workspace = small_run.copy(tmp_path / "workspace")  # the session's small run: ingested, embedded, trained
    dataset_id, run_id = small_run.dataset_id, small_run.run.run_id
    run = pipeline.load_run(workspace, run_id)
    n_themes = run.themes.n_themes
    pipeline.rebuild_themes(workspace, run_id, ThemeConfig(n_themes=n_themes + 1))
    records = workspace.stages(dataset_id, run_id)
    by_stage = {record.stage: record for record in records}
    assert by_stage["ingest"].record_id == dataset_id and by_stage["ingest"].parent_id == ""
    assert by_stage["embedding"].parent_id == dataset_id
    assert by_stage["embedding"].summary["embedding_key"] == model_key(EmbedConfig())
    assert by_stage["embedding"].config == asdict(EmbedConfig())
    assert (
        by_stage["training"].record_id == run_id and by_stage["training"].parent_id == by_stage["embedding"].record_id
    )
    assert by_stage["themes"].parent_id == run_id and by_stage["themes"].config["n_themes"] == n_themes + 1
    ids = {record.record_id for record in records}
    assert all(record.parent_id in ids for record in records if record.stage != "ingest")
    assert all(record.versions["prisma"] and record.created_at for record in records)
    assert [r.created_at for r in records] == sorted(r.created_at for r in records)
    reloaded = pipeline.load_run(workspace, run_id)
    rebuilt = reloaded.record
    assert rebuilt.config["themes"]["n_themes"] == n_themes + 1 and rebuilt.metrics["n_themes"] == n_themes + 1
    assert reloaded.settings.themes == ThemeConfig(n_themes=n_themes + 1)  # the typed view reads the rebuild's too
    assert reloaded.settings.sae == run.settings.sae == SAEConfig(**rebuilt.config["sae"])  # the training's
    assert workspace.run(run_id).config["themes"]["n_themes"] != n_themes + 1  # the training record is kept
