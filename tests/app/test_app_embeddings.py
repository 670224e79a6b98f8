"""Embeddings page: precision shown, token statistics, embedding with live job, cache reuse, model errors."""

import socket

import numpy as np
from app_helpers import new_app, open_page, texts, wait_for_job

from prisma_core import pipeline
from prisma_core.embed import (
    EmbedConfig,
    load_model,
    model_key,
    plan_chunks,
)
from prisma_core.embed.faithful import fast_candidates
from prisma_core.ingest import IngestConfig
from ui.state import job_registry

pytest_plugins = ["app_fixtures"]  # the shared trained workspace


def test_embedded_dataset_offers_training_and_names_the_precision(trained_app):
    at = new_app(trained_app.dataset_id)
    open_page(at, "embeddings")
    assert not at.exception
    assert at.sidebar.selectbox(key="dataset_id").value == trained_app.dataset_id
    choice = pipeline.precision_choice(trained_app.workspace, trained_app.dataset_id, EmbedConfig())
    space = model_key(choice.config(EmbedConfig()))
    numbers = "full-precision numbers" if choice.precision == "fp32" else "a faster, compact number format, used "
    assert texts(at.caption)[0].startswith(f"Runs on **cpu**, with {numbers}")  # technical words wait under Advanced
    (advanced,) = [e for e in at.expander if e.label == "Advanced: how the documents are embedded"]
    runtime = "OpenVINO" if choice.backend == "openvino" else "torch"
    speed = f"{runtime} {choice.precision}" + (", the fast path" if runtime == "OpenVINO" else "")
    assert texts(advanced.caption)[0].startswith(
        f"The model runs with **{speed}** ({choice.reason}). Its vectors are kept under the name *{space}*"
    )
    if fast_candidates(EmbedConfig()):  # a faster precision was tried on the dataset's own documents
        assert "of this dataset's documents" in texts(advanced.caption)[0]
    assert texts(at.success) == ["“BBC sample” is embedded with this model: you can train an SAE."]
    assert not [button for button in at.button if button.key == "embed_button"]


def test_token_statistics_match_the_chunking(trained_app):
    at = new_app(trained_app.dataset_id)
    open_page(at, "embeddings")
    at.toggle(key="count_tokens").set_value(True).run()
    assert not at.exception
    chunking = plan_chunks(load_model(EmbedConfig().model), trained_app.frame["text"].tolist())
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Window"] == f"{chunking.window} tokens" == "254 tokens"
    assert metrics["Longer than one window"] == f"{int((chunking.chunks_per_doc > 1).sum()):,} docs"
    assert metrics["Windows per document"] == f"{chunking.chunks_per_doc.mean():.2f}"
    assert metrics["Tokens per document"] == f"{int(np.median(chunking.tokens_per_doc)):,}"


def test_second_dataset_with_the_same_texts_comes_from_the_cache(trained_app):
    subset = trained_app.frame.head(40)
    dataset_id, _ = pipeline.ingest(
        trained_app.workspace, [("again.csv", subset.to_csv(index=False).encode())], "again", IngestConfig("text")
    )
    at = new_app(dataset_id)
    open_page(at, "embeddings")
    at.button(key="embed_button").click().run()
    wait_for_job(f"embed:{dataset_id}:{model_key(EmbedConfig())}")
    at.run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Documents"] == "40"
    assert metrics["From the cache"] == "40"
    assert metrics["Embedded now"] == "0"
    cached = trained_app.workspace.vectors(dataset_id, model_key(EmbedConfig()))
    original = trained_app.workspace.vectors(trained_app.dataset_id, model_key(EmbedConfig()))
    np.testing.assert_array_equal(cached, original[:40])


def test_unknown_model_shows_the_loading_error(trained_app):
    at = new_app(trained_app.dataset_id)
    open_page(at, "embeddings")
    at.text_input(key="embed_model").input("/nonexistent/prisma-model").run()
    at.button(key="embed_button").click().run()
    missing = EmbedConfig(model="/nonexistent/prisma-model")
    space = model_key(pipeline.dataset_config(trained_app.workspace, trained_app.dataset_id, missing))
    key = f"embed:{trained_app.dataset_id}:{space}"
    job_registry().wait(key, 120)
    at.run()
    (error,) = texts(at.error)
    assert error.startswith(
        "Embedding “BBC sample” failed: The embedding model '/nonexistent/prisma-model' is neither a folder here nor "
        "a model id."
    )
    assert "Use the bundled 'all-MiniLM-L6-v2'" in error
    assert trained_app.workspace.has_vectors(trained_app.dataset_id, model_key(EmbedConfig()))


def test_a_backend_that_cannot_run_here_is_explained(trained_app):
    at = new_app(trained_app.dataset_id)
    open_page(at, "embeddings")
    at.selectbox(key="embed_backend").select("openvino")
    at.selectbox(key="embed_device").select("cuda").run()
    assert not at.exception
    assert texts(at.error) == [
        "The OpenVINO backend runs on the CPU only, not on 'cuda': choose torch. Or set the backend back to auto."
    ]
    assert not [button for button in at.button if button.key == "embed_button"]


def test_a_ray_cluster_address_that_does_not_answer_is_named_in_the_error(trained_app):
    """The Ray address field of the advanced settings: embedding goes to that cluster, and an address where nothing
    answers fails with an error naming it and saying how to start a cluster, storing nothing."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"
    subset = trained_app.frame.head(10)
    dataset_id, _ = pipeline.ingest(
        trained_app.workspace, [("ray.csv", subset.to_csv(index=False).encode())], "ray", IngestConfig("text")
    )
    at = new_app(dataset_id)
    open_page(at, "embeddings")
    at.text_input(key="embed_ray_address").input(f" {address} ").run()
    assert not at.exception
    assert texts(at.caption)[0].startswith(f"Runs on the Ray cluster at **{address}**, with ")
    at.button(key="embed_button").click().run()
    space = model_key(pipeline.dataset_config(trained_app.workspace, dataset_id, EmbedConfig()))
    job_registry().wait(f"embed:{dataset_id}:{space}", 120)
    at.run()
    (error,) = texts(at.error)
    assert error.startswith(f"Embedding “ray” failed: Cannot reach the Ray cluster at '{address}'")
    assert "ray start --head" in error
    assert not trained_app.workspace.has_vectors(dataset_id, space)
