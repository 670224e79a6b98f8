"""The stages chained over a workspace: dataset -> embeddings -> SAE run -> features -> labels -> families.

Each function takes configs and a progress callback, writes its artefacts to the store and returns what the caller
needs to show. The UI and the CLI call these and nothing deeper: `dataset` (ingest, embed, add documents),
`document_passages` (the documents' passages, read or computed), `evidence` (the passages where each
feature fires most), `placement` (added documents placed in the runs),
`training` (train, rebuild themes or families; the stages after the SAE are in `run_stages`), `chain` (ingest ->
embed -> train in one call), `export`, and the read model of `prisma_core.runs`.
"""

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
from prisma_core.runs import LoadedRun, document_themes, family_matrix, family_membership, load_run, resolve_labels
from prisma_core.store import Passages

__all__ = [
    "APP_EXPORTS",
    "EXPORT_FILES",
    "EXPORT_MARKER",
    "AddedDocuments",
    "ChainResult",
    "EmbedSummary",
    "Finished",
    "Ingested",
    "LoadedRun",
    "NewDataset",
    "Passages",
    "Placement",
    "RunSummary",
    "SaeChoice",
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
    "precision_choice",
    "rebuild_families",
    "rebuild_themes",
    "resolve_labels",
    "suggested_sae_config",
    "train_run",
]
