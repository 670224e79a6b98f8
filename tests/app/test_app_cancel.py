"""Cancel for every long job in the app: training, embedding and the demo stop on the Cancel button of their live
panel, store nothing half-done, and can be started again. (Labelling: tests/app/test_app_labels.py.)"""

from __future__ import annotations

import time

from app_helpers import new_app, open_page, texts
from streamlit.testing.v1 import AppTest

from prisma_core import pipeline
from prisma_core.embed import EmbedConfig, model_key
from prisma_core.pipeline.demo import DEMO_NAME
from prisma_core.pipeline.jobs import Job
from ui.state import job_registry

pytest_plugins = ["app_fixtures"]  # the shared trained workspace

TRAIN_BUTTON = "FormSubmitter:train_form-Train"


def cancel_when_reporting(at: AppTest, key: str, timeout: float = 300) -> Job:
    """Wait until the job `key` reports progress, click its Cancel button, and wait for it to end."""
    deadline = time.time() + timeout
    while (job := job_registry().get(key)) is None or (job.running and job.progress is None):
        assert time.time() < deadline, f"job {key!r} never reported progress"
        time.sleep(0.1)
    assert job.running, f"job {key!r} finished before it could be cancelled"
    at.run()
    at.button(key=f"cancel_{key}").click().run()
    assert not at.exception, at.exception
    job = job_registry().wait(key, timeout)
    assert job is not None and not job.running
    at.run()
    assert not at.exception, at.exception
    return job


def test_training_is_cancelled_and_leaves_no_run(trained_app):
    runs_before = [run.run_id for run in trained_app.workspace.runs(trained_app.dataset_id)]
    at = open_page(new_app(trained_app.dataset_id, trained_app.run_id), "train")
    at.number_input(key="n_features").set_value(384)
    at.number_input(key="k").set_value(4)
    at.number_input(key="epochs").set_value(5000)
    at.number_input(key="batch_size").set_value(32)
    at.button(key=TRAIN_BUTTON).click().run()

    job = cancel_when_reporting(at, f"train:{trained_app.dataset_id}")

    assert job.status == "cancelled" and job.error_message.startswith("Training was cancelled at step")
    assert [run.run_id for run in trained_app.workspace.runs(trained_app.dataset_id)] == runs_before
    said = "Training on “BBC sample”: cancelled. Training was cancelled at step"
    assert any(text.startswith(said) for text in texts(at.info))
    assert not [button for button in at.button if button.key == TRAIN_BUTTON and button.disabled]


def test_embedding_is_cancelled_and_stores_no_vector(trained_app):
    frame = trained_app.frame.assign(text="Never embedded before. " + trained_app.frame["text"])  # no cache hit
    csv = frame.to_csv(index=False).encode()
    dataset_id, _ = pipeline.ingest(trained_app.workspace, [("again.csv", csv)], "to embed")
    at = open_page(new_app(dataset_id), "embeddings")
    at.number_input(key="embed_batch_size").set_value(1).run()
    at.button(key="embed_button").click().run()

    job = cancel_when_reporting(at, f"embed:{dataset_id}:{model_key(EmbedConfig(batch_size=1))}")

    assert job.status == "cancelled" and job.error_message.endswith("was cancelled; nothing half-done was kept.")
    assert not trained_app.workspace.has_vectors(dataset_id, model_key(EmbedConfig()))
    assert at.button(key="embed_button").disabled is False
    trained_app.workspace.delete_dataset(dataset_id)


def test_the_demo_is_cancelled_and_leaves_no_run(trained_app):
    at = new_app()
    at.button(key="demo").click().run()

    job = cancel_when_reporting(at, "demo")

    assert job.status == "cancelled"
    demo_datasets = [d for d in trained_app.workspace.datasets() if d.name == DEMO_NAME]
    assert all(not trained_app.workspace.runs(d.dataset_id) for d in demo_datasets)
    assert any(text.startswith("Demo: cancelled.") for text in texts(at.info))
    assert at.button(key="demo").disabled is False
