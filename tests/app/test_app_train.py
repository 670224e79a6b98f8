"""Train SAE page: the runs table, live training without duplicates, diagnostics, and the errors users can cause."""

import pytest
from app_helpers import SMALL_SAE, new_app, open_page, texts

from prisma_core import pipeline
from prisma_core.ingest import IngestConfig
from prisma_core.reading.run_quality import run_name
from prisma_core.sae.config import SUGGESTED_TRAININGS
from ui.state import job_registry, run_widget_key

TRAIN_BUTTON = "FormSubmitter:train_form-Train"

pytest_plugins = ["app_fixtures"]  # the shared trained workspace


def runs_frame(at):
    return next(frame.value for frame in at.dataframe if "detail_unseen" in frame.value.columns)


def test_form_is_prefilled_for_the_corpus_size(trained_app):
    at = new_app(trained_app.dataset_id)
    open_page(at, "train")
    suggested = pipeline.suggested_sae_config(trained_app.workspace, trained_app.dataset_id)
    assert at.number_input(key="n_features").value == suggested.n_features
    assert at.number_input(key="n_trainings").value == suggested.n_trainings == SUGGESTED_TRAININGS
    assert at.number_input(key="k").value == suggested.k
    assert at.number_input(key="epochs").value == suggested.epochs
    assert at.number_input(key="batch_size").value == suggested.batch_size
    assert at.number_input(key="lr").value is None  # "auto"
    assert texts(at.caption)[0] == "150 documents, 384 dimensions each (all-MiniLM-L6-v2)"


def test_the_technical_settings_wait_under_advanced_with_what_they_change_in_plain_words(trained_app):
    """Issue 45: "k", "Epochs", "Batch size", "Step size" were the first things an analyst met on the form."""
    at = open_page(new_app(trained_app.dataset_id), "train")
    (advanced,) = [expander for expander in at.expander if expander.label == "Advanced settings"]
    inside = {widget.key for widget in advanced.number_input}
    outside = {widget.key for widget in at.number_input} - inside
    assert {"k", "epochs", "batch_size", "lr", "seed"} <= inside
    assert outside >= {"n_features", "n_trainings"} and not outside & {"k", "epochs", "batch_size", "lr", "seed"}
    words = " ".join(texts(advanced.caption))
    for setting in ("k", "Epochs", "Batch size", "step size", "Seed"):
        assert f"**{setting}**" in words or f"and **{setting}**" in words
    assert "how many concepts describe each document" in words
    assert all("k strongest" not in text for text in texts(at.markdown))


def test_runs_table_shows_the_run_metrics_and_diagnostics(trained_app):
    at = new_app(trained_app.dataset_id, trained_app.run_id)
    open_page(at, "train")
    assert not at.exception
    record = trained_app.workspace.run(trained_app.run_id)
    row = runs_frame(at).set_index("run").loc[trained_app.run_id]
    assert not {"k", "epochs", "batch", "lr", "seed"} & set(row.index)  # under Advanced
    (trained,) = [frame.value for frame in at.dataframe if "epochs" in frame.value.columns]
    settings = trained.set_index("name").loc[row["name"]]
    assert (settings["k"], settings["epochs"], settings["batch"]) == (
        SMALL_SAE["k"],
        SMALL_SAE["epochs"],
        SMALL_SAE["batch_size"],
    )
    assert row["detail_unseen"] == pytest.approx(1 - record.metrics["fvu_holdout"])
    assert row["detail_train"] == pytest.approx(1 - record.metrics["fvu_train"])
    assert row["never_firing"] == pytest.approx(record.metrics["dead_fraction"])
    assert row["features"] == record.metrics["features_kept"] <= SMALL_SAE["n_features"]
    assert (
        row["comes_back"]
        == f"{record.metrics['found_in_all']} of {row['features']} ({record.metrics['n_trainings']} trainings)"
    )
    assert row["name"] == run_name(record) and " features · " in row["name"]
    assert row["quality"].split(" ")[0] in {"good", "fair", "rough"}
    assert row["families"] == record.metrics["n_families"]
    assert len(at.get("vega_lite_chart")) == 3  # training curves, decoder similarity, co-occurrence
    assert "**How the 20 most common features relate**" in texts(at.markdown)


def test_second_click_joins_the_running_job_and_the_new_run_is_selected(trained_app):
    at = new_app(trained_app.dataset_id, trained_app.run_id)
    open_page(at, "train")
    at.number_input(key="n_features").set_value(64)
    at.number_input(key="k").set_value(4)
    at.number_input(key="epochs").set_value(25)
    at.number_input(key="batch_size").set_value(32)
    at.button(key=TRAIN_BUTTON).click().run()
    key = f"train:{trained_app.dataset_id}"
    first = job_registry().get(key)
    assert first.running
    assert [p for p in at.get("progress")], "the live progress bar is drawn while training"
    at.button(key=TRAIN_BUTTON).click().run()
    assert job_registry().get(key) is first
    assert not [button for button in at.button if button.key == TRAIN_BUTTON and button.disabled]
    job_registry().wait(key, 300)
    at.run()
    assert not at.exception
    runs = trained_app.workspace.runs(trained_app.dataset_id)
    assert len(runs) == 2
    assert (
        at.sidebar.selectbox(key=run_widget_key(trained_app.dataset_id)).value == first.result.run_id == runs[-1].run_id
    )
    assert first.history and {"loss", "fvu", "dead_fraction"} <= set(first.history[0])
    trained_app.workspace.delete_run(first.result.run_id)


def test_k_larger_than_the_features_is_refused_with_advice(trained_app):
    before = job_registry().get(f"train:{trained_app.dataset_id}")
    at = new_app(trained_app.dataset_id)
    open_page(at, "train")
    at.number_input(key="n_features").set_value(384)
    at.number_input(key="k").set_value(500)
    at.button(key=TRAIN_BUTTON).click().run()
    (error,) = texts(at.error)
    assert error == (
        "k=500 active features per document must be fewer than the 384 features. Lower k or raise the number of "
        "features."
    )
    assert job_registry().get(f"train:{trained_app.dataset_id}") is before  # no job was started
    assert len(trained_app.workspace.runs(trained_app.dataset_id)) == 1


def test_training_before_embedding_says_to_embed_first(trained_app):
    dataset_id, _ = pipeline.ingest(
        trained_app.workspace, [("raw.csv", trained_app.frame.head(30).to_csv(index=False).encode())], "not embedded"
    )
    at = new_app(dataset_id)
    open_page(at, "train")
    assert not at.exception
    assert texts(at.warning) == [
        "“not embedded” has no embeddings with all-MiniLM-L6-v2 yet: embed it first, then come back."
    ]
    assert not at.get("number_input")
    trained_app.workspace.delete_dataset(dataset_id)


def test_too_few_documents_for_an_sae(trained_app):
    dataset_id, _ = pipeline.ingest(
        trained_app.workspace,
        [("tiny.csv", trained_app.frame.head(12).to_csv(index=False).encode())],
        "tiny",
        IngestConfig(text_column="text"),
    )
    pipeline.embed_dataset(trained_app.workspace, dataset_id)
    at = new_app(dataset_id)
    open_page(at, "train")
    at.button(key=TRAIN_BUTTON).click().run()
    (error,) = texts(at.error)
    assert error == (
        "12 documents leave 11 for training after holding out 1; an SAE needs at least 20. Add documents or lower "
        "the holdout fraction."
    )
    trained_app.workspace.delete_dataset(dataset_id)
