"""What every page shares: the workspace, the job registry, cached loaders, and the dataset/run selection.

Cached objects are keyed by the workspace's address (its folder or s3:// URI), so tests (and users) pointing
PRISMA_WORKSPACE elsewhere get their own. Large read-only data (documents, a run's codes) uses st.cache_resource,
which hands out the object itself instead of unpickling a copy on every rerun; pages treat it as read-only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from prisma_core.pipeline import (
    CHANGING_RUN_TABLES,
    DatasetRecord,
    LoadedRun,
    PrecisionChoice,
    Workspace,
    load_run,
    precision_choice,
    resolve_workspace,
)
from prisma_core.pipeline.jobs import JobRegistry
from prisma_core.pipeline.read_model import DatasetDocuments, run_name, shown_feature
from prisma_core.pipeline.settings import EmbedConfig, model_key
from ui.text import md

PAGES = {
    "home": "pages/home.py",
    "datasets": "pages/datasets.py",
    "embeddings": "pages/embeddings.py",
    "train": "pages/train.py",
    "features": "pages/features.py",
    "families": "pages/families.py",
    "labels": "pages/labels.py",
    "explore": "pages/explore.py",
    "glossary": "pages/glossary.py",
}
DATASET_KEY = "dataset_id"
RUN_KEY = "run_id"
FEATURE_KEY = "feature_id"
"""The feature whose card is open; survives page switches (it is not a widget key)."""
EMBED_CONFIG_KEY = "embed_config"
PENDING_SELECTION_KEY = "pending_selection"


RUN_MEMO_KEY = "_read_this_run"
"""Store reads kept for the rest of one script run; the router empties it when a run starts."""


# -- shared resources -----------------------------------------------------------------------------------------


STORAGE_SECRETS = "s3"
"""The secrets table ([s3] in .streamlit/secrets.toml) with the object store's settings for an s3:// workspace."""


def start_script_run() -> None:
    """Called by the router first thing in every run: what once_per_run kept is read again."""
    st.session_state[RUN_MEMO_KEY] = {}


def once_per_run(name: str, read: Callable[[], Any]) -> Any:
    """read()'s answer, read once per script run (the sidebar and the page ask for the same lists)."""
    memo = st.session_state.setdefault(RUN_MEMO_KEY, {})
    if name not in memo:
        memo[name] = read()
    return memo[name]


@st.cache_resource(show_spinner=False)
def workspace_at(uri: str) -> Workspace:
    """The workspace at this folder or s3:// URI (its `uri`, the key of every cached view of it)."""
    return Workspace(uri, storage_options=dict(secret(STORAGE_SECRETS) or {}))


def workspace() -> Workspace:
    return workspace_at(resolve_workspace())


@st.cache_resource(show_spinner=False)
def job_registry() -> JobRegistry:
    return JobRegistry()


@st.cache_resource(show_spinner="Loading documents…", max_entries=4)
def documents(workspace_path: str, dataset_id: str, n_documents: int) -> DatasetDocuments:
    """A dataset's documents when it holds `n_documents` (stored documents never change; documents can be added):
    every text in memory for a small dataset, read when shown for a large one (`store.datasets.is_large`)."""
    return DatasetDocuments.open(workspace_at(workspace_path), dataset_id)


@st.cache_resource(show_spinner=False)
def _revisions() -> dict[str, int]:
    return {}


def revision(run_id: str) -> int:
    """Changes whenever a run's labels, families or themes change, so cached views of the run are reloaded.

    It counts the store's table versions, which grow with every commit by any process (the command line, another
    app server), plus this process's own bumps. The versions are read once per script run (four tables opened each
    time, asked for by several views of a page).
    """
    versions = once_per_run("table_versions", lambda: workspace().tables.table_versions(CHANGING_RUN_TABLES))
    return _revisions().get(run_id, 0) + versions


def bump_revision(run_id: str) -> None:
    _revisions()[run_id] = revision(run_id) + 1


def revision_bumper(run_id: str) -> Callable[[], None]:
    """bump_revision for a background job's thread (which has no Streamlit context): call it when the job is done."""
    revisions = _revisions()

    def bump() -> None:
        revisions[run_id] = revisions.get(run_id, 0) + 1

    return bump


@st.cache_resource(show_spinner=False)
def _last_loaded() -> dict[tuple[str, str], LoadedRun]:
    """(workspace, run id) -> the run as last loaded, for the LOADED_RUNS runs opened last: a new revision reuses
    its codes and directions."""
    return {}


LOADED_RUNS = 2
"""Runs (and revisions of runs) a server keeps loaded."""


@st.cache_resource(show_spinner="Loading the run…", max_entries=LOADED_RUNS)
def run_at(workspace_path: str, run_id: str, revision: int) -> LoadedRun:
    """The run at this revision. Labels, families and themes are read again; the codes and directions (the bulk,
    never changed once written) are shared with the revision loaded before, so revisions cost little memory."""
    last, key = _last_loaded(), (workspace_path, run_id)
    run = load_run(workspace_at(workspace_path), run_id, previous=last.pop(key, None))
    last[key] = run
    while len(last) > LOADED_RUNS:  # the runs opened longest ago go; their cached revisions age out too
        last.pop(next(iter(last)))
    return run


def loaded_run(run_id: str) -> LoadedRun:
    return run_at(workspace().uri, run_id, revision(run_id))


def dataset_documents(dataset_id: str) -> DatasetDocuments:
    return documents(workspace().uri, dataset_id, dataset_size(dataset_id))


def dataset_size(dataset_id: str) -> int:
    """How many documents the dataset holds now (read once per script run): the key of every cached view of its
    documents, which documents added to it make stale."""
    return next(d.n_documents for d in once_per_run("datasets", workspace().datasets) if d.dataset_id == dataset_id)


def embed_config() -> EmbedConfig:
    """The embedding settings chosen on the Embeddings page (defaults until then); training uses the same space."""
    return st.session_state.get(EMBED_CONFIG_KEY) or EmbedConfig()


@st.cache_data(show_spinner="Choosing how to embed this dataset on this computer (the first time: up to a minute)…")
def _embedding_choice(workspace_uri: str, dataset_id: str, n_documents: int, config: EmbedConfig) -> PrecisionChoice:
    return precision_choice(workspace_at(workspace_uri), dataset_id, config)


def embedding_choice(dataset_id: str, config: EmbedConfig) -> PrecisionChoice:
    """The backend and precision the dataset is embedded with under `config`, and why, kept for the session's life.
    On a CPU with a faster precision than fp32 the first answer for a dataset embeds a sample of its documents at
    both (embed/faithful.py; on a new machine the int8 model is first quantized and checked, embed/quantize.py);
    every later one is read from the dataset's embedding record or the kept verdict."""
    return _embedding_choice(workspace().uri, dataset_id, dataset_size(dataset_id), config)


def vector_space(dataset_id: str, config: EmbedConfig) -> str:
    """The vector space (`model_key`) the dataset is embedded into under `config`."""
    return model_key(embedding_choice(dataset_id, config).config(config))


def set_embed_config(config: EmbedConfig) -> None:
    st.session_state[EMBED_CONFIG_KEY] = config


def secret(name: str) -> Any:
    """A value from .streamlit/secrets.toml, or None when there is no secrets file or no such entry."""
    try:
        return st.secrets.get(name)
    except (FileNotFoundError, st.errors.StreamlitSecretNotFoundError):
        return None


# -- selection (sidebar) --------------------------------------------------------------------------------------


def select(dataset_id: str | None = None, run_id: str | None = None) -> None:
    """Ask the sidebar to select a dataset/run on the next run (widget values cannot change once drawn)."""
    st.session_state[PENDING_SELECTION_KEY] = (dataset_id, run_id)


def run_widget_key(dataset_id: str) -> str:
    """The sidebar's run picker has one widget per dataset: a picker shared by all datasets kept showing the
    previous dataset's run (Streamlit keeps a keyed widget's state when only its options change)."""
    return f"run_pick_{dataset_id}"


def sidebar() -> None:
    """Dataset and run pickers shared by every page (drawn by the router). The selected run is kept under RUN_KEY
    (plain state); the picker mirrors it."""
    ws = workspace()
    datasets = {record.dataset_id: record for record in reversed(once_per_run("datasets", ws.datasets))}
    pending_dataset, pending_run = st.session_state.pop(PENDING_SELECTION_KEY, (None, None))
    _keep_valid(DATASET_KEY, datasets, pending_dataset)
    with st.sidebar:
        if not datasets:
            st.caption("No dataset yet: add one on the Datasets page or run the demo on Home.")
            st.session_state.pop(RUN_KEY, None)
            return
        dataset_id = st.selectbox(
            "Dataset",
            list(datasets),
            format_func=lambda i: f"{datasets[i].name} ({datasets[i].n_documents:,} documents)",
            key=DATASET_KEY,
        )
        runs = {run.run_id: run for run in reversed(ws.runs(dataset_id))}
        _keep_valid(RUN_KEY, runs, pending_run)
        if runs:
            run_id = st.session_state.get(RUN_KEY) or next(iter(runs))
            st.session_state[RUN_KEY] = st.session_state[run_widget_key(dataset_id)] = run_id
            st.selectbox(
                "Trained model (run)",
                list(runs),
                format_func=lambda i: run_name(runs[i]),
                key=run_widget_key(dataset_id),
                on_change=_picked_run,
                args=(dataset_id,),
                help="Every page shows the run chosen here. A run's name says when it was trained, how many "
                "features it has and how well they capture the documents.",
            )
        else:
            st.caption("No trained model for this dataset yet.")
        running = job_registry().running()
        if running:
            st.caption("Working: " + ", ".join(md(job.title) for job in running))


def _picked_run(dataset_id: str) -> None:
    st.session_state[RUN_KEY] = st.session_state[run_widget_key(dataset_id)]


def _keep_valid(key: str, options: dict[str, Any], pending: str | None) -> None:
    if pending in options:
        st.session_state[key] = pending
    elif st.session_state.get(key) not in options:
        st.session_state.pop(key, None)


def current_dataset() -> DatasetRecord | None:
    dataset_id = st.session_state.get(DATASET_KEY)
    if not dataset_id:
        return None
    return next((d for d in once_per_run("datasets", workspace().datasets) if d.dataset_id == dataset_id), None)


def training_job_key(dataset_id: str) -> str:
    """The job registry's key of training on this dataset (the Train SAE page starts it)."""
    return f"train:{dataset_id}"


DEMO_JOB = "demo"
"""The job registry's key of the one-click demo (Home starts it; it ingests, embeds and trains)."""


def open_feature(feature_id: int) -> None:
    st.session_state[FEATURE_KEY] = int(feature_id)


def current_feature(run: LoadedRun) -> int:
    """The open feature card: the last one chosen, else the first offered (a pinned one, else the densest)."""
    return shown_feature(run, st.session_state.get(FEATURE_KEY))
