"""The stages chained over a workspace: dataset -> embeddings -> SAE run -> features -> labels -> families.

Each function takes configs and a progress callback, writes its artefacts to the store and returns what the caller
needs to show: `dataset` (ingest, embed, add documents), `embedding_choice` (the precision a dataset is embedded
in), `document_passages` (the documents' passages, read or computed), `evidence` (the passages where each feature
fires most), `placement` (added documents placed in the runs), `training` (train, rebuild themes or families; the
stages after the SAE are in `run_stages`), `chain` (ingest -> embed -> train in one call), `labelling` (the label
jobs), `report`, `demo`, `export`, `downloads`, `trends`, and `jobs` (long work in background threads).

This package is the only door into the core for the app (`app.py`, `pages/`, `ui/`) and the command line
(`prisma_core.cli`, `prisma_core.__main__`): they import `prisma_core.pipeline` and its modules, nothing else of
`prisma_core` (tests/core/test_import_graph.py). What they need of the stages comes through here: the stage
functions, the read model of a run (`LoadedRun`, `load_run`), the store's records, the typed errors and progress
events below; the doors `settings` (every config type and its described fields), `intake` (files, columns and dates
before ingesting), `read_model` (what the pages show of a run), `edits` (the analyst's edits and their carrying),
`labelling` (the label jobs, the Ollama connection), `comparison` (groups compared), `trends` and `report.writer`.
A door re-exports; the logic stays in its stage's module.
"""

from prisma_core.embed.faithful import PrecisionChoice
from prisma_core.errors import DamagedTableError, LabellingError, PrismaError, RunBehindError, SettingsError
from prisma_core.pipeline.chain import ChainResult, Finished, Ingested, NewDataset, SaeChoice, ingest_embed_train
from prisma_core.pipeline.dataset import AddedDocuments, EmbedSummary, add_documents, embed_dataset, ingest
from prisma_core.pipeline.document_passages import passage_batches, passages, passages_of_texts
from prisma_core.pipeline.embedding_choice import dataset_config, precision_choice
from prisma_core.pipeline.evidence import document_passage_features, feature_evidence, feature_quotes
from prisma_core.pipeline.export import EXPORT_FILES, EXPORT_MARKER, export_run, export_target
from prisma_core.pipeline.files import APP_EXPORTS
from prisma_core.pipeline.placement import Placement, grow_dataset, place_in_runs, place_new_documents
from prisma_core.pipeline.training import (
    RunSummary,
    rebuild_families,
    rebuild_themes,
    suggested_sae_config,
    train_run,
)
from prisma_core.progress import Progress, ProgressCallback
from prisma_core.reading.runs import (
    LoadedRun,
    document_themes,
    family_matrix,
    family_membership,
    load_run,
    resolve_labels,
)
from prisma_core.store import DatasetRecord, EditRecord, NamedFamily, Passages, RunRecord, Workspace, resolve_workspace
from prisma_core.store.retry import plain_reason
from prisma_core.store.runs import CHANGING_RUN_TABLES

__all__ = [
    "APP_EXPORTS",
    "CHANGING_RUN_TABLES",
    "EXPORT_FILES",
    "EXPORT_MARKER",
    "AddedDocuments",
    "ChainResult",
    "DamagedTableError",
    "DatasetRecord",
    "EditRecord",
    "EmbedSummary",
    "Finished",
    "Ingested",
    "LabellingError",
    "LoadedRun",
    "NamedFamily",
    "NewDataset",
    "Passages",
    "Placement",
    "PrecisionChoice",
    "PrismaError",
    "Progress",
    "ProgressCallback",
    "RunBehindError",
    "RunRecord",
    "RunSummary",
    "SaeChoice",
    "SettingsError",
    "Workspace",
    "add_documents",
    "dataset_config",
    "document_passage_features",
    "document_themes",
    "embed_dataset",
    "export_run",
    "export_target",
    "family_matrix",
    "family_membership",
    "feature_evidence",
    "feature_quotes",
    "grow_dataset",
    "ingest",
    "ingest_embed_train",
    "load_run",
    "passage_batches",
    "passages",
    "passages_of_texts",
    "place_in_runs",
    "place_new_documents",
    "plain_reason",
    "precision_choice",
    "rebuild_families",
    "rebuild_themes",
    "resolve_labels",
    "resolve_workspace",
    "suggested_sae_config",
    "train_run",
]
