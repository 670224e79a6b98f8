"""The door to naming a run's concepts: the labelling settings, plans and their estimated time, the jobs (features,
then families, then themes and sub-themes), scoring the labels, and the Ollama connection they use (its settings,
the client, credentials kept secret)."""

from prisma_core.interpret.labelling import (
    LabelConfig,
    LabelPlan,
    LabelScope,
    LabelSummary,
    ScopeSummary,
    ScoreBaseline,
    ScoreSummary,
    label_quality,
    label_scope,
    plan_labels,
    score_baseline,
    score_run,
)
from prisma_core.interpret.labelling.estimate import counted, describe_plan, measured_pace
from prisma_core.interpret.labelling.job import SetAside
from prisma_core.interpret.ollama_client import OllamaClient
from prisma_core.interpret.ollama_config import API_KEY_ENV, DEFAULT_HOST, OllamaConfig
from prisma_core.interpret.secrets import Secret, split_host_credentials

__all__ = [
    "API_KEY_ENV",
    "DEFAULT_HOST",
    "LabelConfig",
    "LabelPlan",
    "LabelScope",
    "LabelSummary",
    "OllamaClient",
    "OllamaConfig",
    "ScopeSummary",
    "ScoreBaseline",
    "ScoreSummary",
    "Secret",
    "SetAside",
    "counted",
    "describe_plan",
    "label_quality",
    "label_scope",
    "measured_pace",
    "plan_labels",
    "score_baseline",
    "score_run",
    "split_host_credentials",
]
