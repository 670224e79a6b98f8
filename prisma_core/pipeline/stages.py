"""The stage registry: every stage of Prisma, in the order of the chain that makes and shows a run.

Each stage is one `Stage` (`prisma_core.lineage`): its name, a constant of `prisma_core.store.stages` that also
declares the tables it makes (the store deletes and repairs by them), the type of its settings and its `run`. A run
is the chain of its stage records (`Workspace.stage_records`): ingest, embedding, then its own, oldest first.
Training runs the stages after its SAE in their order here (`run_stages.AFTER_SAE`). Adding a stage: see
docs/code-map.md."""

from __future__ import annotations

from prisma_core.concepts.themes import ThemeConfig
from prisma_core.embed import EmbedConfig
from prisma_core.ingest import IngestConfig
from prisma_core.lineage import Stage
from prisma_core.pipeline.dataset import add_documents, embed_dataset, ingest
from prisma_core.pipeline.export import export_run
from prisma_core.pipeline.labelling.job import LabelConfig
from prisma_core.pipeline.labelling.scope import label_scope
from prisma_core.pipeline.placement import place_new_documents
from prisma_core.pipeline.report.config import ReportConfig
from prisma_core.pipeline.report.writer import write_report
from prisma_core.pipeline.run_stages import AFTER_SAE, split_themes
from prisma_core.pipeline.training import train_run
from prisma_core.reading.explore import saved_document_map
from prisma_core.sae import SAEConfig
from prisma_core.store.stages import (
    APPEND,
    EMBEDDING,
    EXPORT,
    INGEST,
    LABELLING,
    MAP,
    PLACEMENT,
    REPORT,
    SUBTHEMES,
    TRAINING,
)

KEYWORDS_STAGE, THEMES_STAGE, FAMILIES_STAGE = AFTER_SAE

STAGES = (
    Stage(INGEST, IngestConfig, ingest),
    Stage(APPEND, IngestConfig, add_documents),
    Stage(EMBEDDING, EmbedConfig, embed_dataset),
    Stage(MAP, None, saved_document_map),
    Stage(TRAINING, SAEConfig, train_run),
    KEYWORDS_STAGE,
    Stage(SUBTHEMES, ThemeConfig, split_themes),  # run inside the themes' stage, its record written before theirs
    THEMES_STAGE,
    FAMILIES_STAGE,
    Stage(LABELLING, LabelConfig, label_scope),
    Stage(PLACEMENT, None, place_new_documents),
    Stage(REPORT, ReportConfig, write_report),
    Stage(EXPORT, None, export_run),
)
