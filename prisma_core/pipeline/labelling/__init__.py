"""Label a run's features, families and themes (with Ollama, or any `Labeller`), and score every label of a run.

Made for the app as much as for the command line: each stage reports progress, stops when `should_stop()` turns
true, and returns a summary with counts and the errors met. It raises only when nothing can be done at all
(Ollama unreachable, model unknown), before anything is written, so keyword labels and earlier LLM labels stay.

Where things live:
- `planning`: what a batch would ask about and its cost, before it starts (`plan_labels`).
- `estimate`: how long a plan takes, in seconds and sentences (`describe_plan`).
- `job`: a batch's settings (`LabelConfig`), summary (`LabelSummary`), progress, cancel and failure streak.
- `features`: feature labels (`label_run`).
- `groups`: family and theme labels (`label_groups`).
- `scope`: a job over a scope, features then families then themes (`label_scope`), as the page and the CLI run it.
- `labellers`: the labeller a job is given, built from the settings (`open_labeller`: Ollama or keywords).
- `storing`: the batch's stage record and group labels written back onto the stored groups.
- `scores`: embedding and detection scores, the shuffled baseline, per-source quality (`score_run`).

The labellers themselves, the keywords and the Ollama connection are a layer below, in `prisma_core.interpret`;
what the app and the command line use of the connection (its settings, the client, credentials kept secret) is
re-exported here, their door.
"""

from prisma_core.interpret.ollama_client import OllamaClient
from prisma_core.interpret.ollama_config import API_KEY_ENV, DEFAULT_HOST, OllamaConfig
from prisma_core.interpret.secrets import Secret, split_host_credentials
from prisma_core.pipeline.labelling.estimate import counted, describe_plan, measured_pace
from prisma_core.pipeline.labelling.features import label_run
from prisma_core.pipeline.labelling.groups import (
    FeatureGroup,
    group_documents,
    label_group,
    label_groups,
)
from prisma_core.pipeline.labelling.job import LabelConfig, LabelSummary, SetAside, StopCheck, never_stop
from prisma_core.pipeline.labelling.labellers import (
    keyword_labeller,
    ollama_labeller,
    open_labeller,
    run_keyword_labeller,
)
from prisma_core.pipeline.labelling.planning import PROMPT_OVERHEAD_TOKENS, LabelPlan, plan_labels
from prisma_core.pipeline.labelling.scope import LabelScope, ScopeSummary, label_scope
from prisma_core.pipeline.labelling.scores import (
    ScoreBaseline,
    ScoreSummary,
    label_quality,
    score_baseline,
    score_run,
)

__all__ = [
    "API_KEY_ENV",
    "DEFAULT_HOST",
    "PROMPT_OVERHEAD_TOKENS",
    "FeatureGroup",
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
    "StopCheck",
    "counted",
    "describe_plan",
    "group_documents",
    "keyword_labeller",
    "label_group",
    "label_groups",
    "label_quality",
    "label_run",
    "label_scope",
    "measured_pace",
    "never_stop",
    "ollama_labeller",
    "open_labeller",
    "plan_labels",
    "run_keyword_labeller",
    "score_baseline",
    "score_run",
    "split_host_credentials",
]
