"""The background job engine (`prisma_core.pipeline.jobs`): one job per key, failures kept in words, jobs niced below
the pages, the embedding model let go when the last job ends, cancelling."""

import os
import threading

import numpy as np

from prisma_core.errors import TrainingError
from prisma_core.pipeline import jobs
from prisma_core.pipeline.jobs import JOB_NICENESS, JobRegistry
from prisma_core.progress import Progress


def test_a_second_start_with_the_same_key_joins_the_running_job():
    registry, release = JobRegistry(), threading.Event()

    def work(progress):
        progress(Progress("train_sae", 1, 4, "Epoch 1 of 4", {"loss": 0.9, "fvu": 0.8, "dead_fraction": 0.1}))
        release.wait(10)
        progress(Progress("train_sae", 4, 4, "Epoch 4 of 4", {"loss": 0.5, "fvu": 0.4, "dead_fraction": 0.0}))
        return "run-1"

    first, started = registry.start("train:ds", "Training", work)
    second, started_again = registry.start("train:ds", "Training", lambda progress: "run-2")
    assert started and not started_again and second is first
    assert registry.running() == [first]
    release.set()
    done = registry.wait("train:ds", 10)
    assert done.status == "done" and done.result == "run-1"
    assert [point["step"] for point in done.history] == [1.0, 4.0]
    assert done.history[-1] == {"step": 4.0, "loss": 0.5, "fvu": 0.4, "dead_fraction": 0.0}
    assert done.stages == ["train_sae"] and done.progress.fraction == 1.0
    _, started = registry.start("train:ds", "Training", lambda progress: "run-3")
    assert started and registry.wait("train:ds", 10).result == "run-3"


def test_failures_are_kept_with_a_message_for_the_analyst():
    registry = JobRegistry()

    def refuse(progress):
        raise TrainingError("k=500 must be fewer than the 384 features. Lower k.")

    def crash(progress):
        raise ZeroDivisionError("division by zero")

    registry.start("a", "Training", refuse)
    registry.start("b", "Embedding", crash)
    assert registry.wait("a", 10).error_message == "k=500 must be fewer than the 384 features. Lower k."
    assert registry.wait("b", 10).error_message == "Unexpected error (ZeroDivisionError): division by zero"
    assert registry.get("a").status == "failed" and registry.running() == []


def test_jobs_run_below_the_pages_priority_and_the_server_keeps_its_own(monkeypatch):
    monkeypatch.setattr(jobs, "JOB_NICENESS", JOB_NICENESS)  # the product's niceness (the suite turns it off)
    registry, server = JobRegistry(), os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    job = registry.start("map", "Map", lambda progress: os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))[0]
    assert registry.wait("map", 10) is job and job.result == min(server + JOB_NICENESS, 19)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == server


def test_the_embedding_model_is_let_go_when_the_last_job_ends(bbc):
    import prisma_core.embed.openvino_backend as openvino_backend
    from prisma_core.embed import EmbedConfig, embed_texts, resolve_backend

    config = EmbedConfig()
    assert resolve_backend(config) == "openvino"  # the bundled model's default on this CPU
    texts = bbc["text"].head(4).tolist()
    registry, other_may_end = JobRegistry(), threading.Event()
    registry.start("other", "Other", lambda progress: other_may_end.wait(600))  # runs until released below
    first = registry.wait(registry.start("embed", "Embed", lambda progress: embed_texts(texts, config))[0].key, 600)
    assert openvino_backend._compiled.cache_info().currsize == 1  # another job still runs: the model stays
    other_may_end.set()
    registry.wait("other", 30)
    assert openvino_backend._compiled.cache_info().currsize == 0  # the last job ended: let go (about 200 MB)
    again = registry.wait(registry.start("embed", "Embed", lambda progress: embed_texts(texts, config))[0].key, 600)
    assert np.allclose(again.result, first.result, atol=1e-6)  # loaded again from the disk cache, same vectors


def test_cancel_raises_at_the_next_report_or_asks_stop_aware_work_to_stop():
    registry, reported, release = JobRegistry(), threading.Event(), threading.Event()

    def embed(progress):
        for step in range(1000):
            progress(Progress("embed", step, 1000))
            reported.set()
            release.wait(0.01)
        return "all embedded"

    def label(progress, should_stop):
        done = 0
        while not should_stop():
            done += 1
            progress(Progress("label", done, 10**6))
            release.wait(0.01)
        return f"kept {done}"

    registry.start("embed", "Embedding", embed)
    registry.start("label", "Labelling", label, stop_aware=True)
    assert reported.wait(10) and registry.cancel("nothing-runs-here") is None
    assert registry.cancel("embed").cancel_requested and registry.cancel("label").cancel_requested
    embedded, labelled = registry.wait("embed", 10), registry.wait("label", 10)
    assert embedded.status == "cancelled" and embedded.result is None
    assert embedded.error_message == "Embedding was cancelled; nothing half-done was kept."
    assert labelled.status == "cancelled" and labelled.error is None and labelled.result.startswith("kept ")
    assert registry.running() == [] and registry.cancel("label") is None
