"""Adding documents to a dataset that has runs: the upload, the job that places them in every run, and what the
analyst is told (whether training again would change the picture); the notice on a run that lacks them, and the
note on a run documents were placed in."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import streamlit as st

from prisma_core.pipeline import DatasetRecord, ProgressCallback, RunBehindError, RunRecord
from prisma_core.pipeline.intake import SUPPORTED_EXTENSIONS, Source
from prisma_core.pipeline.jobs import Job
from prisma_core.pipeline.read_model import Placement, placements
from ui.progress import job_panel, start_job
from ui.state import workspace
from ui.text import md

if TYPE_CHECKING:
    from prisma_core.pipeline import AddedDocuments

RESULT_KEY = "added_documents"
"""Session state: (dataset id, the outcome of the last addition this session watched)."""


def growth_job_key(dataset_id: str) -> str:
    return f"grow:{dataset_id}"


def add_documents_section(dataset: DatasetRecord) -> None:
    """Upload more documents into the selected dataset; they are read with the dataset's own columns, embedded and
    placed in each of its runs, with no new training."""
    n_runs = len(workspace().runs(dataset.dataset_id))
    st.markdown(
        f"Add documents to “{md(dataset.name)}” (now {dataset.n_documents:,}): files with the same columns as "
        "the first upload. Documents whose text the dataset holds already are skipped. "
        + (
            f"The new documents are embedded and placed in the dataset's {n_runs} trained "
            f"{'model' if n_runs == 1 else 'models'} at once, without training again: each says whether a new "
            "training would change the picture."
            if n_runs
            else "The dataset has no trained model yet: the new documents are embedded when you train one."
        )
    )
    key = growth_job_key(dataset.dataset_id)
    job = job_panel(key, on_success=lambda done: _keep_result(dataset.dataset_id, done))
    files = st.file_uploader(
        "More files",
        type=[extension.lstrip(".") for extension in SUPPORTED_EXTENSIONS],
        accept_multiple_files=True,
        key=f"add_upload_{dataset.dataset_id}",
    )
    running = job is not None and job.running
    if files and st.button("Add the documents", type="primary", key="add_documents", disabled=running):
        sources = [(file.name, file.getvalue()) for file in files]
        start_job(key, f"Adding documents to “{dataset.name}”", _adding(dataset.dataset_id, sources, n_runs))
    _show_result(dataset.dataset_id)


Outcome = tuple["AddedDocuments | None", list["Placement"]]


def _adding(dataset_id: str, sources: list[Source], n_runs: int) -> Callable[[ProgressCallback], Outcome]:
    ws = workspace()

    def work(progress: ProgressCallback) -> Outcome:
        from prisma_core.pipeline import add_documents, grow_dataset  # the run's read model: on first use

        if n_runs:
            return grow_dataset(ws, dataset_id, sources, progress=progress)
        return add_documents(ws, dataset_id, sources, progress=progress), []

    return work


def _keep_result(dataset_id: str, job: Job) -> None:
    st.session_state[RESULT_KEY] = (dataset_id, job.result)


def _show_result(dataset_id: str) -> None:
    shown_for, result = st.session_state.get(RESULT_KEY, (None, None))
    if shown_for != dataset_id or result is None:
        return
    added, placements = result
    if added is not None:
        _show_added(added)
    runs = {run.run_id: run for run in workspace().runs(dataset_id)}
    for placement in placements:
        run = runs.get(placement.run_id)
        name = f"Model trained {run.created_at[:16].replace('T', ' ')}" if run else placement.run_id
        if placement.retrain_advised:
            st.warning(f"**{md(name)}**: {md(placement.verdict())}", icon=":material/model_training:")
        else:
            st.info(f"**{md(name)}**: {md(placement.verdict())}", icon=":material/task_alt:")


def _show_added(added: AddedDocuments) -> None:
    n_skipped = len(added.already_there)
    skipped = f" Skipped {n_skipped:,} whose text the dataset holds already." if n_skipped else ""
    renamed = (
        f" {len(added.renamed_ids):,} ids the dataset holds already got a suffix (e.g. "
        f"{md(next(iter(added.renamed_ids)))})."
        if added.renamed_ids
        else ""
    )
    st.success(
        f"Added {added.n_added:,} documents: the dataset now holds {added.n_documents:,}.{skipped}{renamed}",
        icon=":material/check_circle:",
    )


def behind_notice(dataset: DatasetRecord, error: RunBehindError) -> None:
    """A run that lacks documents added to its dataset (an addition stopped half-way, or made from the command
    line): say so, and place them."""
    st.warning(md(error), icon=":material/playlist_add:")
    key = growth_job_key(dataset.dataset_id)
    job = job_panel(key, on_success=lambda done: _keep_result(dataset.dataset_id, done))
    idle = job is None or not job.running
    if idle and st.button("Place the new documents", type="primary", key="place_documents"):
        ws = workspace()

        def work(progress: ProgressCallback) -> Outcome:
            from prisma_core.pipeline import place_in_runs

            return None, place_in_runs(ws, dataset.dataset_id, progress)

        start_job(key, "Placing the new documents", work)


def placement_note(run: RunRecord) -> None:
    """Where a run is shown: how many documents were placed in it since training, and the newest placement's advice
    when it was to train again."""
    done = placements(workspace(), run)
    if not done:
        return
    n_added = sum(placement.n_added for placement in done)
    st.caption(
        f"{n_added:,} documents were added to the dataset after this model was trained, and placed in it without a "
        "new training."
    )
    if done[-1].retrain_advised:
        st.info(f"{md(done[-1].verdict())} Train again on the Train SAE page.", icon=":material/model_training:")
