"""Train SAE: settings (pre-filled for the corpus size), live training curves, runs to compare, diagnostics."""

from dataclasses import replace

import streamlit as st

from prisma_core import pipeline
from prisma_core.pipeline import DamagedTableError, PrismaError, RunRecord, RunSummary
from prisma_core.pipeline.jobs import Job
from prisma_core.pipeline.read_model import (
    comes_back,
    detail_captured,
    n_features,
    overfitting,
    quality_words,
    run_name,
)
from prisma_core.pipeline.settings import FamilyConfig, SAEConfig, check_config, field_help, run_settings
from ui import charts
from ui.config_form import config_inputs
from ui.gates import require_dataset
from ui.glossary import TERMS, explain
from ui.growth import placement_note
from ui.loaders import diagnostics, embedding_dim, suggested_settings
from ui.navigation import route_here
from ui.progress import job_panel, start_job
from ui.runs import run_quality_note
from ui.state import PAGES, RUN_KEY, embed_config, revision, select, training_job_key, vector_space, workspace
from ui.tables import rows_table
from ui.text import md

route_here()


MAIN_SETTINGS = ("n_features", "n_trainings")
ADVANCED_SETTINGS = (
    "k",
    "epochs",
    "batch_size",
    "lr",
    "seed",
    "k_aux",
    "aux_alpha",
    "dead_after",
    "holdout_fraction",
    "grad_clip",
    "device",
)
ADVANCED_WORDS = (
    "These settings change how the model learns; the values filled in suit this dataset. **k**: how many concepts "
    "describe each document (more keeps more detail, fewer gives broader concepts). **Epochs**: how many times "
    "training reads every document (too many on few documents makes the model learn them by heart). **Batch size** "
    "and **step size**: how many documents each learning step reads, and how far it moves. **Seed**: any number; "
    "the same number gives the same result. The others are safety settings that rarely need changing."
)
FAMILY_SETTINGS = ("tau", "iterations")
SAE_HELP = field_help(SAEConfig)
HEATMAP_FEATURES = 20
WARNINGS_KEY = "train_warnings"

dataset = require_dataset()
ws = workspace()
st.title("Train a sparse autoencoder")
st.markdown(
    "The sparse autoencoder (SAE) learns a dictionary of **features**: concepts found in the documents, each "
    "document described by a handful of them. The settings below are suggested for the size of this dataset; the "
    "defaults are a good start, and the technical ones wait under *Advanced settings*."
)
explain("sparse autoencoder (SAE)", "trainings compared", "detail captured", "overfitting")

embedding = embed_config()
space = vector_space(dataset.dataset_id, embedding)
if not ws.has_vectors(dataset.dataset_id, space):
    st.warning(
        f"“{md(dataset.name)}” has no embeddings with {md(embedding.model)} yet: embed it first, then come back.",
        icon=":material/warning:",
    )
    st.page_link(PAGES["embeddings"], label="Go to Embeddings", icon=":material/scatter_plot:")
    st.stop()


def settings_form(suggested: SAEConfig, n_documents: int, dim: int) -> tuple[SAEConfig, FamilyConfig] | None:
    """The form, filled with the settings suggested for the dataset; returns validated configs when submitted
    (errors are shown and give None)."""
    with st.form("train_form"):
        sae = config_inputs(suggested, MAIN_SETTINGS)
        with st.expander("Advanced settings"):
            st.caption(ADVANCED_WORDS)
            sae |= config_inputs(suggested, ADVANCED_SETTINGS)
            st.markdown("**Feature families**")
            families = config_inputs(FamilyConfig(), FAMILY_SETTINGS, key_prefix="train_")
        if not st.form_submit_button("Train", type="primary"):
            return None
    try:
        sae_config = replace(suggested, **sae)
        st.session_state[WARNINGS_KEY] = (dataset.dataset_id, check_config(sae_config, n_documents, dim))
        return sae_config, FamilyConfig(**families)
    except PrismaError as error:
        st.error(md(error), icon=":material/error:")
        return None


def on_trained(job: Job) -> None:
    summary: RunSummary = job.result
    select(dataset.dataset_id, summary.run_id)


def trained_with(sae: SAEConfig | None) -> dict[str, object]:
    """The SAE settings the runs table shows (empty for a run whose record does not give them)."""
    values = (sae.k, sae.epochs, sae.batch_size, sae.lr, sae.seed) if sae is not None else (None,) * 5
    return dict(zip(("k", "epochs", "batch", "lr", "seed"), values, strict=True))


def runs_table(runs: list[RunRecord]) -> None:
    rows = []
    for run in reversed(runs):
        m = run.metrics
        rows.append(
            {
                "name": run_name(run),
                "quality": quality_words(run),
                "overfitted": bool(overfitting(run)),
                "detail_unseen": detail_captured(run),
                "detail_train": 1.0 - m["fvu_train"] if isinstance(m.get("fvu_train"), float) else None,
                "never_firing": m.get("dead_fraction"),
                "features": n_features(run),
                "comes_back": comes_back(run),
                "families": m.get("n_families"),
                "seconds": m.get("seconds"),
                "run": run.run_id,
            }
        )
    number = st.column_config.NumberColumn
    rows_table(
        rows,
        "runs_table",
        {
            "name": st.column_config.TextColumn("Run", width="large"),
            "quality": st.column_config.TextColumn("Quality", help=TERMS["detail captured"]),
            "overfitted": st.column_config.CheckboxColumn("Overfitted", help=TERMS["overfitting"]),
            "detail_unseen": number(
                "Detail captured (unseen documents)",
                format="percent",
                help="How much of the embeddings the features reproduce on documents kept aside during training.",
            ),
            "detail_train": number(
                "Detail captured (training documents)",
                format="percent",
                help="The same on the documents it was trained on. Much higher than on unseen documents means "
                "overfitting.",
            ),
            "never_firing": number("Never-firing features", format="percent", help=TERMS["never-firing features"]),
            "features": number("Features", help="How many features the run kept."),
            "comes_back": st.column_config.TextColumn("Found in every training", help=TERMS["trainings compared"]),
            "families": number("Families"),
            "seconds": number("Training time (s)", format="%.0f"),
            "run": st.column_config.TextColumn("Run id"),
        },
    )
    with st.expander("Advanced: the settings each run was trained with"):
        st.caption(ADVANCED_WORDS)
        settings = [{"name": run_name(run), **trained_with(run_settings(run).sae)} for run in reversed(runs)]
        rows_table(
            settings,
            "runs_settings_table",
            {
                "name": st.column_config.TextColumn("Run", width="large"),
                "k": number("k", help=SAE_HELP["k"]),
                "epochs": number("Epochs", help=SAE_HELP["epochs"]),
                "batch": number("Batch size", help=SAE_HELP["batch_size"]),
                "lr": number("Step size", format="%.2e", help=SAE_HELP["lr"]),
                "seed": number("Seed", format="%d"),
            },
        )


def selected_run_section(run_id: str) -> None:
    run = ws.run(run_id)
    st.subheader("Selected run")
    st.markdown(f"**{md(run_name(run))}**")
    st.caption(f"Choose another run in the sidebar. Run id: {run_id}")
    run_quality_note(run)
    placement_note(run)
    if run.history:
        st.altair_chart(charts.training_curves(run.history), width="stretch")
    try:
        names, similarity, cooccurrence = diagnostics(ws.uri, run_id, revision(run_id), HEATMAP_FEATURES)
    except DamagedTableError as error:  # a table's files damaged: the repair, not deleting the run, is the way out
        st.error(f"This run cannot be opened: {md(error)}")
        names = []
    except PrismaError as error:  # e.g. its weights file was damaged: the run can still be deleted below
        st.error(f"This run cannot be opened: {md(error)} Delete it below and train again.")
        names = []
    if names:
        st.markdown(f"**How the {len(names)} most common features relate**")
        left, right = st.columns(2)
        left.altair_chart(
            charts.heatmap(similarity, names, "How alike they are (1 = the same concept)", "closeness"),
            width="stretch",
        )
        right.altair_chart(
            charts.heatmap(cooccurrence, names, "How often they fire together (share of the row's documents)", "share"),
            width="stretch",
        )
    with st.expander("Delete this run"):
        confirmed = st.checkbox("Yes, delete this run and its labels and families", key=f"confirm_run_{run_id}")
        if st.button("Delete run", disabled=not confirmed, key="delete_run"):
            ws.delete_run(run_id)
            st.rerun()


dim = embedding_dim(ws.uri, dataset.dataset_id, space)
st.caption(f"{dataset.n_documents:,} documents, {dim} dimensions each ({md(embedding.model)})")
job_key = training_job_key(dataset.dataset_id)
job = job_panel(job_key, on_success=on_trained, live_chart=True)
running = job is not None and job.running
suggested = suggested_settings(ws.uri, dataset.dataset_id, dataset.n_documents, embedding)
submitted = settings_form(suggested, dataset.n_documents, dim)
warned_dataset, warnings = st.session_state.get(WARNINGS_KEY, (None, []))
for warning in warnings if warned_dataset == dataset.dataset_id else []:
    st.warning(md(warning), icon=":material/warning:")
if submitted is not None and not running:
    sae_config, family_config = submitted
    dataset_id = dataset.dataset_id
    start_job(
        job_key,
        f"Training on “{dataset.name}”",
        lambda progress, should_stop: pipeline.train_run(
            ws, dataset_id, sae_config, embedding, family_config, progress=progress, should_stop=should_stop
        ),
        stop_aware=True,
    )
elif submitted is not None:
    st.info("A training run on this dataset is already in progress: its progress is shown above.")

runs = ws.runs(dataset.dataset_id)
if runs:
    st.subheader("Runs on this dataset")
    runs_table(runs)
    if st.session_state.get(RUN_KEY):
        selected_run_section(st.session_state[RUN_KEY])
    st.page_link(PAGES["features"], label="Next: browse the features", icon=":material/arrow_forward:")
