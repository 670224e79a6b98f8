"""The door to every stage's settings for the app's forms and the command line's flags: the config types, their
fields described once (`config_docs`), the checks made before a run and the embedding choices a config resolves to.
The labelling settings (`LabelConfig`, `OllamaConfig`) are in `pipeline.labelling`, with the client they need."""

from prisma_core.concepts.families import FamilyConfig
from prisma_core.concepts.themes import ThemeConfig
from prisma_core.config_docs import field_docs, field_help, field_kind, field_metadata, form_choices, literal_values
from prisma_core.curation.edit_config import CarryConfig, EditConfig
from prisma_core.embed import (
    DEFAULT_MODEL,
    EmbedConfig,
    model_key,
    resolve_backend,
    resolve_config_precision,
    resolve_device,
)
from prisma_core.ingest import IngestConfig
from prisma_core.interpret.label_scores import ScoreConfig
from prisma_core.pipeline.report.config import ReportConfig
from prisma_core.run_shape.run_settings import run_settings
from prisma_core.sae import SAEConfig, check_config
from prisma_core.trends.config import TrendConfig

__all__ = [
    "DEFAULT_MODEL",
    "CarryConfig",
    "EditConfig",
    "EmbedConfig",
    "FamilyConfig",
    "IngestConfig",
    "ReportConfig",
    "SAEConfig",
    "ScoreConfig",
    "ThemeConfig",
    "TrendConfig",
    "check_config",
    "field_docs",
    "field_help",
    "field_kind",
    "field_metadata",
    "form_choices",
    "literal_values",
    "model_key",
    "resolve_backend",
    "resolve_config_precision",
    "resolve_device",
    "run_settings",
]
