"""Stage records: every stage names its parent (dataset -> embedding -> run -> families, themes, labels), and a
rebuild's record is what the run reports from then on."""

from dataclasses import asdict

import pytest
from small_run import SMALL_SAE

from prisma_core import pipeline
from prisma_core.concepts.families import FamilyConfig
from prisma_core.concepts.themes import ThemeConfig
from prisma_core.embed import EmbedConfig, model_key
from prisma_core.errors import TrainingError
from prisma_core.interpret.keywords import KeywordConfig
from prisma_core.progress import Progress
from prisma_core.run_shape.run_settings import run_settings
from prisma_core.sae import SAEConfig
from prisma_core.store import Workspace
from prisma_core.store.stages import EMBEDDING, FAMILIES, INGEST, KEYWORDS, SUBTHEMES, THEMES, TRAINING

AFTER_SAE = {KEYWORDS: KeywordConfig(), THEMES: ThemeConfig(), FAMILIES: FamilyConfig()}
"""The stages of a training after its SAE whose settings are sections of the run's, with those the small run was trained
with (the defaults); the sub-themes are made with the themes' settings."""


def test_a_trained_run_is_a_graph_of_stage_records(small_run):
    workspace = Workspace(small_run.path)
    run = workspace.run(small_run.run.run_id)
    records = workspace.stage_records.of(run.dataset_id, run.run_id)
    trained_at = next(record.created_at for record in records if record.record_id == run.run_id)
    # the training's own records, written up to its record (later ones, e.g. exports by other tests, are not its)
    own = {r.stage: r for r in records if r.run_id == run.run_id and r.created_at <= trained_at}
    assert sorted(own) == sorted([TRAINING, SUBTHEMES, *AFTER_SAE])  # one record per stage
    training = own[TRAINING]
    assert training.record_id == run.run_id
    assert training.config == {"sae": run.config["sae"], "embed": run.config["embed"]}  # only the SAE's settings
    shown = ("n_themes", "n_subthemes", "n_families")  # counted by the themes', sub-themes' and families' records
    assert training.summary == {name: value for name, value in run.metrics.items() if name not in shown}
    for stage, config in AFTER_SAE.items():
        record = own[stage]
        assert record.parent_id == run.run_id and record.dataset_id == run.dataset_id
        assert record.config == asdict(config) == run.config[stage]  # the run's settings section of its name
        assert record.summary["seconds"] > 0 and record.versions == training.versions
        assert set(record.versions) >= {"prisma", "torch", "lancedb"} and all(record.versions.values())
    assert training.summary["seconds"] > 0 and training.summary["n_documents"] == 60
    assert own[KEYWORDS].summary["n_labelled"] == len(workspace.feature_stats.of(run.run_id))
    assert own[THEMES].summary["n_themes"] == run.metrics["n_themes"] == len(workspace.groups.themes(run.run_id))
    subthemes = own[SUBTHEMES]
    assert (
        subthemes.parent_id == run.run_id
        and subthemes.config == asdict(ThemeConfig())
        and subthemes.summary["seconds"] > 0
    )
    assert subthemes.summary["n_subthemes"] == run.metrics["n_subthemes"] == len(workspace.groups.subthemes(run.run_id))
    assert (
        own[FAMILIES].summary["n_families"] == run.metrics["n_families"] == len(workspace.groups.families(run.run_id))
    )
    # the records of the stages after the SAE are written before the training's, which comes just before the run's
    up_to_training = [r.stage for r in records if r.created_at <= trained_at]
    assert up_to_training[-5:] == [KEYWORDS, SUBTHEMES, THEMES, FAMILIES, TRAINING]
    assert set(small_run.run.seconds) == {"train", "analyse", "themes", "families"}
    assert small_run.run.seconds["themes"] == own[THEMES].summary["seconds"] > subthemes.summary["seconds"]
    # read back, the settings and counts are the run record's own: a stage's seconds are not the run's
    loaded = pipeline.load_run(workspace, run.run_id)
    assert loaded.record.config == run.config and loaded.record.metrics == run.metrics
    assert loaded.settings == run_settings(run, loaded.directions.shape[1])
    assert loaded.settings.keywords == KeywordConfig() and loaded.settings.sae == SAEConfig(**run.config["sae"])


def test_a_cancelled_training_leaves_no_stage_record_of_its_run(small_run, tmp_path):
    workspace = small_run.copy(tmp_path / "workspace")
    dataset_id, kept = small_run.dataset_id, small_run.run.run_id
    before = workspace.stage_records.of(dataset_id)
    reported: set[str] = set()

    def report(event: Progress) -> None:
        reported.add(event.stage)

    def after_the_families() -> bool:  # cancelled once every stage after the SAE left its record
        return "families" in reported

    with pytest.raises(TrainingError, match="cancelled"):
        pipeline.train_run(workspace, dataset_id, SMALL_SAE, progress=report, should_stop=after_the_families)
    assert "families" in reported and [run.run_id for run in workspace.runs()] == [kept]
    assert workspace.stage_records.of(dataset_id) == before
    assert workspace.hidden_runs() == []


def test_every_stage_record_names_the_record_it_was_made_from(small_run, tmp_path):
    workspace = small_run.copy(tmp_path / "workspace")  # the session's small run: ingested, embedded, trained
    dataset_id, run_id = small_run.dataset_id, small_run.run.run_id
    run = pipeline.load_run(workspace, run_id)
    n_themes = run.themes.n_themes
    pipeline.rebuild_themes(workspace, run_id, ThemeConfig(n_themes=n_themes + 1))
    records = workspace.stage_records.of(dataset_id, run_id)
    by_stage = {record.stage: record for record in records}
    assert by_stage[INGEST].record_id == dataset_id and by_stage[INGEST].parent_id == ""
    assert by_stage[EMBEDDING].parent_id == dataset_id
    assert by_stage[EMBEDDING].summary["embedding_key"] == model_key(EmbedConfig())
    assert by_stage[EMBEDDING].config == asdict(EmbedConfig())
    assert by_stage[TRAINING].record_id == run_id and by_stage[TRAINING].parent_id == by_stage[EMBEDDING].record_id
    assert by_stage[THEMES].parent_id == run_id and by_stage[THEMES].config["n_themes"] == n_themes + 1
    trained, rebuilt_themes = [record for record in records if record.stage == THEMES]  # one more, same shape
    assert trained.created_at < by_stage[TRAINING].created_at < rebuilt_themes.created_at
    assert [record.stage for record in records][-2:] == [SUBTHEMES, THEMES]  # the rebuild splits its themes again
    assert rebuilt_themes.summary.keys() == trained.summary.keys() and rebuilt_themes.summary["seconds"] > 0
    assert rebuilt_themes.summary["n_themes"] == n_themes + 1 and rebuilt_themes.run_id == run_id
    ids = {record.record_id for record in records}
    assert all(record.parent_id in ids for record in records if record.stage != INGEST)
    assert all(record.versions["prisma"] and record.created_at for record in records)
    assert [r.created_at for r in records] == sorted(r.created_at for r in records)
    reloaded = pipeline.load_run(workspace, run_id)
    rebuilt = reloaded.record
    assert rebuilt.config["themes"]["n_themes"] == n_themes + 1 and rebuilt.metrics["n_themes"] == n_themes + 1
    assert reloaded.settings.themes == ThemeConfig(n_themes=n_themes + 1)  # the typed view reads the rebuild's too
    assert reloaded.settings.sae == run.settings.sae == SAEConfig(**rebuilt.config["sae"])  # the training's
    assert (reloaded.settings.families, reloaded.settings.keywords) == (run.settings.families, run.settings.keywords)
    n_subthemes = len(reloaded.subtheme_info)
    assert rebuilt.metrics == run.record.metrics | {"n_themes": n_themes + 1, "n_subthemes": n_subthemes}
    assert workspace.run(run_id).config["themes"]["n_themes"] != n_themes + 1  # the training record is kept
