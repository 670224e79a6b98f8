"""What a page needs before it draws: the selected dataset, the selected run loaded; otherwise the page says where
to get one (or shows the training under way, or the documents a run still lacks) and stops."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from prisma_core.pipeline import DamagedTableError, DatasetRecord, PrismaError, RunBehindError
from prisma_core.pipeline.jobs import Job
from ui.growth import behind_notice
from ui.progress import job_panel
from ui.state import DEMO_JOB, PAGES, RUN_KEY, current_dataset, job_registry, loaded_run, training_job_key
from ui.text import md

if TYPE_CHECKING:
    from prisma_core.pipeline import LoadedRun


def require_dataset() -> DatasetRecord:
    """The selected dataset; otherwise say where to get one and stop the page."""
    dataset = current_dataset()
    if dataset is None:
        st.info("There is no dataset yet. Upload files on the Datasets page, or run the demo from Home.")
        st.page_link(PAGES["datasets"], label="Go to Datasets", icon=":material/upload_file:")
        st.stop()
    return dataset


def require_run() -> LoadedRun:
    """The selected run, loaded; otherwise say how to train one and stop the page."""
    dataset = require_dataset()
    run_id = st.session_state.get(RUN_KEY)
    if not run_id:
        if (training := training_job(dataset)) is not None:
            st.info(
                f"A model is being trained on “{md(dataset.name)}” right now: this page shows it as soon as "
                "training is over.",
                icon=":material/hourglass_top:",
            )
            job_panel(training.key)
        else:
            st.info(f"The dataset “{md(dataset.name)}” has no trained SAE yet. Train one on the Train SAE page.")
        st.page_link(PAGES["train"], label="Go to Train SAE", icon=":material/model_training:")
        st.stop()
    try:
        return loaded_run(run_id)
    except RunBehindError as error:  # documents were added and are not placed in the run yet
        behind_notice(dataset, error)
        st.stop()
    except DamagedTableError as error:  # a table's files damaged: the repair, not deleting the run, is the way out
        st.error(f"This SAE run cannot be opened: {md(error)}")
        st.stop()
    except PrismaError as error:  # e.g. its weights file was damaged: say so instead of showing a traceback
        st.error(f"This SAE run cannot be opened: {md(error)} Delete it on the Train SAE page and train again.")
        st.page_link(PAGES["train"], label="Go to Train SAE", icon=":material/model_training:")
        st.stop()


def training_job(dataset: DatasetRecord) -> Job | None:
    """The running job that is training the dataset's first run, if any: Train SAE's, or the demo's for its own
    dataset."""
    from prisma_core.pipeline.demo import DEMO_NAMES

    jobs = job_registry()
    candidates = [jobs.get(training_job_key(dataset.dataset_id))]
    if dataset.name in DEMO_NAMES:
        candidates.append(jobs.get(DEMO_JOB))
    return next((job for job in candidates if job is not None and job.running), None)
