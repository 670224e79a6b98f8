"""Live view of a background job: progress bar, live metrics chart, and the outcome once it finishes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from prisma_core.pipeline.jobs import Job
from ui import charts
from ui.state import job_registry
from ui.text import md

POLL_SECONDS = 1.0
STAGE_NAMES = {
    "demo": "Preparing the demo corpus",
    "check": "Checking the files",
    "ingest": "Storing the documents",
    "embed": "Embedding documents",
    "place": "Placing the new documents in the model",
    "train_sae": "Training the sparse autoencoder",
    "label": "Naming features",
    "passages": "Cutting the documents into passages",
    "evidence": "Finding the passages where each concept appears",
    "families": "Finding feature families",
    "themes": "Grouping features into themes",
    "family labels": "Naming families",
    "theme labels": "Naming themes",
    "sub-theme labels": "Naming sub-themes",
    "map": "Drawing the map of documents",
    "embedding scores": "Scoring labels",
    "detection": "Checking labels with the model",
}
CANCEL_HELP = "Stop this job. Results it has already stored are kept; nothing half-written is."
_WATCHED_KEY = "watched_jobs"
"""Jobs this session started or saw running: only their watchers get the success callback (e.g. a page switch)."""


def job_panel(
    key: str,
    on_success: Callable[[Job], None] | None = None,
    live_chart: bool = False,
    on_error: Callable[[Job], bool] | None = None,
) -> Job | None:
    """Show the job stored under `key`, if any. While it runs, the panel refreshes itself every POLL_SECONDS;
    when it finishes, the whole page reruns so it shows the stored results, and a session that watched the job
    gets `on_success(job)` once (e.g. to select the new run). A failed job is shown by `on_error(job)` when that
    returns True (it drew its own message), else as an error with the job's message."""
    job = job_registry().get(key)
    if job is None:
        return None
    if not job.running:
        if job.error is None or on_error is None or not on_error(job):
            _finished(job, on_success)
        return job
    _watched().add(job.job_id)

    @st.fragment(run_every=POLL_SECONDS)
    def live() -> None:
        current = job_registry().get(key)
        if current is None or current.job_id != job.job_id or not current.running:
            st.rerun()
        _draw_running(current, live_chart)

    live()
    return job


def start_job(key: str, title: str, work: Callable[..., Any], stop_aware: bool = False) -> None:
    """Start the job (or find it already running) and rerun, so the page draws its live panel.

    `stop_aware` work is called as `work(progress, should_stop)`, other work as `work(progress)`
    (see prisma_core.pipeline.jobs)."""
    job, started = job_registry().start(key, title, work, stop_aware=stop_aware)
    _watched().add(job.job_id)
    if not started:
        st.toast(f"{md(title)} is already running: showing its progress.")
    st.rerun()


def _watched() -> set[str]:
    return st.session_state.setdefault(_WATCHED_KEY, set())


def _draw_running(job: Job, live_chart: bool) -> None:
    """The job's panel, its spinner turning while it runs. Drawn through the panel's methods, not as a `with` block:
    leaving a `with st.status(...)` block marks the status complete, so a running job showed a finished check mark."""
    panel = st.status(f"{md(job.title)}: running for {job.seconds:.0f} s", expanded=True, state="running")
    event = job.progress
    if event is None:
        panel.progress(0.0, text="Starting…")
    else:
        stage = STAGE_NAMES.get(event.stage, event.stage)
        panel.progress(event.fraction, text=f"{stage}: {md(event.message)}" if event.message else stage)
    if live_chart and job.history:
        panel.altair_chart(charts.training_curves(job.history), width="stretch")
    if not job.cancel_requested and panel.button(
        "Cancel", icon=":material/stop_circle:", key=f"cancel_{job.key}", help=CANCEL_HELP
    ):
        job_registry().cancel(job.key)
    if job.cancel_requested:
        panel.caption("Cancelling: stopping after the step in progress…")


def _finished(job: Job, on_success: Callable[[Job], None] | None) -> None:
    """An error stays visible to everyone on the page; success reaches the sessions that watched the job, once."""
    if job.status == "cancelled":
        said = f" {md(job.error_message)}" if job.error is not None else ""
        st.info(f"{md(job.title)}: cancelled.{said}", icon=":material/stop_circle:")
        return
    if job.error is not None:
        st.error(f"{md(job.title)} failed: {md(job.error_message)}", icon=":material/error:")
        return
    watched = _watched()
    if job.job_id in watched:
        watched.discard(job.job_id)
        if on_success is not None:
            on_success(job)
            st.rerun()
