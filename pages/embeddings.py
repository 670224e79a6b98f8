"""Embeddings: choose a model, see how documents split into model windows, embed with live progress."""

from dataclasses import replace

import numpy as np
import pandas as pd
import streamlit as st

from prisma_core import pipeline
from prisma_core.pipeline import EmbedSummary, PrecisionChoice, PrismaError
from prisma_core.pipeline.settings import (
    DEFAULT_MODEL,
    EmbedConfig,
    resolve_device,
)
from ui.config_form import config_inputs
from ui.gates import require_dataset
from ui.loaders import token_statistics
from ui.navigation import route_here
from ui.progress import job_panel, start_job
from ui.state import PAGES, embed_config, embedding_choice, set_embed_config, vector_space, workspace
from ui.text import md, sample_notice

route_here()

KEY_PREFIX = "embed_"
ADVANCED_SETTINGS = ("batch_size", "precision", "backend", "device", "normalize")

dataset = require_dataset()
st.title("Embeddings")
st.markdown(
    "Each document becomes one vector. Models read at most a few hundred tokens at a time, so longer documents "
    "are split into consecutive windows that are embedded together and averaged: every word counts, nothing is "
    "cut off. Vectors are cached, so a text is never embedded twice with the same model."
)


def settings_form(current: EmbedConfig) -> EmbedConfig | None:
    values = config_inputs(current, ["model"], KEY_PREFIX, columns=1)
    with st.expander("Advanced settings"):
        values |= config_inputs(current, ADVANCED_SETTINGS, KEY_PREFIX, columns=len(ADVANCED_SETTINGS))
        values |= config_inputs(current, ["ray_address"], KEY_PREFIX, columns=1)
    cleaned = {"model": values["model"].strip() or DEFAULT_MODEL, "ray_address": values["ray_address"].strip()}
    try:
        return replace(current, **values | cleaned)
    except PrismaError as error:
        st.error(md(error))
        return None


def show_token_statistics(config: EmbedConfig) -> None:
    try:
        stats = token_statistics(workspace().uri, dataset.dataset_id, dataset.n_documents, config)
    except PrismaError as error:
        st.error(md(error), icon=":material/error:")
        return
    chunks, tokens = stats["chunks"], stats["tokens"]
    longer = int((chunks > 1).sum())
    cols = st.columns(4)
    cols[0].metric("Window", f"{stats['window']} tokens", help="Content tokens per window (special tokens excluded).")
    cols[1].metric("Longer than one window", f"{longer:,} docs", help=f"{longer / len(chunks):.0%} of the documents")
    cols[2].metric("Windows per document", f"{chunks.mean():.2f}", help=f"At most {int(chunks.max())}.")
    cols[3].metric("Tokens per document", f"{int(np.median(tokens)):,}", help=f"Median; at most {int(tokens.max()):,}.")
    counts = pd.Series(chunks).value_counts().sort_index()
    st.bar_chart(pd.DataFrame({"documents": counts.to_numpy()}, index=counts.index.astype(str)), x_label="windows")
    if stats["counted"] < stats["of"]:
        st.caption(sample_notice(stats["counted"], stats["of"]) + ": the figures above are for that sample.")


def numbers_in_words(choice: PrecisionChoice) -> str:
    if choice.precision == "fp32":
        return "with full-precision numbers"
    if not choice.n_checked:
        return "with the faster, compact number format chosen in the settings"
    return (
        "with a faster, compact number format, used because it gives practically the same vectors as full precision "
        "on a sample of this dataset's own documents"
    )


def show_summary(summary: EmbedSummary) -> None:
    cols = st.columns(4)
    cols[0].metric("Documents", f"{summary.n_documents:,}")
    cols[1].metric(
        "Embedded now", f"{summary.n_computed:,}", help=f"{summary.n_chunks:,} windows, {summary.n_tokens:,} tokens"
    )
    cols[2].metric("From the cache", f"{summary.n_cached:,}")
    cols[3].metric("Time", f"{summary.seconds:.1f} s")


config = settings_form(embed_config())
if config is None:
    st.stop()
try:
    choice = embedding_choice(dataset.dataset_id, config)
except PrismaError as error:
    st.error(f"{md(error)} Or set the backend back to auto.", icon=":material/error:")
    st.stop()
runtime = {"openvino": "OpenVINO", "ollama": "Ollama"}.get(choice.backend, "torch")
speed = f"{runtime} {choice.precision}" + (", the fast path" if runtime == "OpenVINO" else "")  # faster than torch here
device = resolve_device(config.device)
where = f"the Ray cluster at **{md(config.ray_address)}**" if config.ray_address else f"**{device}**"
if choice.backend == "ollama":
    where = "the Ollama server set by OLLAMA_HOST (the model must be pulled there)"
st.caption(f"Runs on {where}, {numbers_in_words(choice)}.")
with st.expander("Advanced: how the documents are embedded"):
    st.caption(
        f"The model runs with **{speed}** ({md(choice.reason)}). Its vectors are kept under the name "
        f"*{md(vector_space(dataset.dataset_id, config))}*: documents embedded again with the same model and settings "
        "reuse them."
    )


with st.expander("Token statistics: how documents split into windows"):
    if st.toggle("Count tokens", key="count_tokens"):
        show_token_statistics(config)

job_key = f"embed:{dataset.dataset_id}:{vector_space(dataset.dataset_id, config)}"
job = job_panel(job_key)
if job is not None and job.status == "done" and isinstance(job.result, EmbedSummary):
    show_summary(job.result)
running = job is not None and job.running
embedded = workspace().has_vectors(dataset.dataset_id, vector_space(dataset.dataset_id, config))
if embedded and not running:
    set_embed_config(config)
    st.success(f"“{md(dataset.name)}” is embedded with this model: you can train an SAE.", icon=":material/check:")
    st.page_link(PAGES["train"], label="Next: train an SAE", icon=":material/arrow_forward:")
if not embedded and st.button(
    f"Embed {dataset.n_documents:,} documents", type="primary", disabled=running, key="embed_button"
):
    set_embed_config(config)
    ws, dataset_id = workspace(), dataset.dataset_id
    start_job(
        job_key,
        f"Embedding “{dataset.name}”",
        lambda progress: pipeline.embed_dataset(ws, dataset_id, config, progress),
    )
