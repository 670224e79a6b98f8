"""Home: what Prisma does, what the workspace holds, the next step, and the one-click demo."""

import pandas as pd
import streamlit as st

from prisma_core.pipeline import PrismaError
from prisma_core.pipeline.jobs import Job
from prisma_core.pipeline.read_model import run_name
from ui.growth import placement_note
from ui.navigation import route_here
from ui.runs import run_quality_note
from ui.state import (
    DEMO_JOB,
    PAGES,
    RUN_KEY,
    current_dataset,
    embed_config,
    secret,
    select,
    vector_space,
    workspace,
)
from ui.text import md

route_here()

st.title("Prisma")
st.markdown(
    "Prisma splits each document of a collection into a handful of **named concepts**, the way a prism splits "
    "light into colours. Upload documents, train a sparse autoencoder on their embeddings, and explore the "
    "concepts it finds: what they mean, which documents carry them, and how they group into families."
)
# What follows imports the pipeline (torch, scikit-learn) and the charts: only once the heading is on screen, so a
# fresh server paints Home at once.
from prisma_core.pipeline.demo import (  # noqa: E402
    DEMO_DOCS_ENV,
    DEMO_FILE_ENV,
    DEMO_LICENCE,
    DEMO_SOURCE_PAGE,
    SAMPLE_DESCRIPTION,
    DemoConfig,
    DemoDownloadError,
    existing_demo,
    run_demo,
    save_local_copy,
)
from ui.progress import job_panel, start_job  # noqa: E402
from ui.themes import home_themes  # noqa: E402

home_themes()


def open_demo_results(job: Job) -> None:
    dataset_id, run_id = job.result
    select(dataset_id, run_id)
    st.switch_page(PAGES["features"])


def demo_config() -> DemoConfig:
    return DemoConfig.from_settings({name: secret(name) for name in (DEMO_FILE_ENV, DEMO_DOCS_ENV)})


def start_demo(config: DemoConfig) -> None:
    """A demo already in the workspace opens at once; otherwise the pipeline starts in the background."""
    ws = workspace()
    done = existing_demo(ws, config)
    if done is not None:
        select(*done)
        st.switch_page(PAGES["features"])
    start_job(DEMO_JOB, "Demo", lambda progress: run_demo(ws, config, progress))


def offer_local_copy(job: Job) -> bool:
    """When the demo corpus could not be downloaded, offer to upload a copy right here (instead of the raw error)."""
    if not isinstance(job.error, DemoDownloadError):
        return False
    offline_demo = (
        " “Run with defaults” needs no network: its notes come with Prisma." if config.corpus == "sample" else ""
    )
    st.warning(
        "The demo documents could not be downloaded: this computer seems to be offline, or huggingface.co cannot be "
        "reached. If you have a copy of MTSamples (mtsamples.csv from Kaggle's “Medical Transcriptions”, or a Parquet "
        "copy), upload it here and the demo runs from it." + offline_demo,
        icon=":material/cloud_off:",
    )
    upload = st.file_uploader("Your copy of MTSamples (CSV or Parquet)", type=["csv", "parquet"], key="demo_upload")
    st.page_link(
        PAGES["datasets"], label="Or analyse your own documents: upload any CSV", icon=":material/upload_file:"
    )
    if upload is not None:
        try:
            save_local_copy(workspace().path / "demo", upload.name, upload.getvalue())
        except PrismaError as error:
            st.error(
                f"{md(error)} To analyse this file as your own documents, upload it on the Datasets page.",
                icon=":material/error:",
            )
            return True
        start_demo(config.larger() if config.corpus == "sample" else config)
    return True


def demo_description(config: DemoConfig) -> str:
    if config.corpus == "sample":
        return f"{config.size} {SAMPLE_DESCRIPTION} (nothing is downloaded)"
    return f"{config.size} clinical notes from [MTSamples]({DEMO_SOURCE_PAGE}) ({DEMO_LICENCE})"


with st.container(border=True):
    st.subheader("Try it: one-click demo")
    config = demo_config()
    st.markdown(
        f"Runs the whole pipeline with default settings on {demo_description(config)} and opens the concepts it "
        "found. The first run takes a few minutes on a laptop CPU; after that the demo opens at once."
    )
    demo_job = job_panel(DEMO_JOB, on_success=open_demo_results, live_chart=True, on_error=offer_local_copy)
    running = demo_job is not None and demo_job.running
    if st.button("Run with defaults", type="primary", icon=":material/play_arrow:", disabled=running, key="demo"):
        start_demo(config)
    if config.corpus == "sample":
        larger = config.larger()
        st.caption(
            f"A larger demo: {demo_description(larger)}, real notes in 40 specialties, downloaded once (about 17 MB) "
            "and kept in the workspace; it takes longer to train."
        )
        if st.button("Run the larger demo", icon=":material/cloud_download:", disabled=running, key="demo_large"):
            start_demo(larger)

st.subheader("Your workspace")
ws = workspace()
datasets = ws.datasets()
if not datasets:
    st.markdown(
        "The demo's dataset and results will appear here when it finishes."
        if running
        else "The workspace is empty. Start with the demo above, or upload your own documents."
    )
    st.page_link(PAGES["datasets"], label="Upload documents", icon=":material/upload_file:")
    st.stop()

rows = []
for dataset in reversed(datasets):
    runs = ws.runs(dataset.dataset_id)
    rows.append(
        {
            "dataset": dataset.name,
            "documents": dataset.n_documents,
            "created": dataset.created_at[:16].replace("T", " "),
            "trained models": len(runs),
            "latest run": run_name(runs[-1]) if runs else "",
        }
    )
st.dataframe(pd.DataFrame(rows), hide_index=True, key="workspace_table")

st.subheader("Next step")
dataset = current_dataset()
if dataset is None:
    st.markdown("Pick a dataset in the sidebar.")
elif not ws.has_vectors(dataset.dataset_id, vector_space(dataset.dataset_id, embed_config())):
    st.markdown(f"“{md(dataset.name)}” is not embedded yet: compute its embeddings.")
    st.page_link(PAGES["embeddings"], label="Embed the documents", icon=":material/scatter_plot:")
elif not ws.runs(dataset.dataset_id):
    st.markdown(f"“{md(dataset.name)}” is embedded: train a sparse autoencoder on it.")
    st.page_link(PAGES["train"], label="Train an SAE", icon=":material/model_training:")
else:
    run = ws.run_or_latest(st.session_state.get(RUN_KEY), dataset.dataset_id)
    st.markdown(f"“{md(dataset.name)}” has a trained model: look at its concepts. Shown: {md(run_name(run))}.")
    run_quality_note(run)
    placement_note(run)
    st.page_link(PAGES["features"], label="Browse features", icon=":material/label:")
    st.page_link(PAGES["families"], label="See feature families", icon=":material/account_tree:")
    st.page_link(PAGES["explore"], label="Explore documents", icon=":material/travel_explore:")
