"""Label a run's features, families and themes with Ollama, and score every label of a run.

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
- `storing`: the batch's stage record and group labels written back onto the stored groups.
- `scores`: embedding and detection scores, the shuffled baseline, per-source quality (`score_run`).
"""

from prisma_core.interpret.labelling.features import label_run
from prisma_core.interpret.labelling.groups import (
    FeatureGroup,
    group_documents,
    label_group,
    label_groups,
)
from prisma_core.interpret.labelling.job import LabelConfig, LabelSummary, StopCheck, never_stop
from prisma_core.interpret.labelling.planning import PROMPT_OVERHEAD_TOKENS, LabelPlan, plan_labels
from prisma_core.interpret.labelling.scope import LabelScope, ScopeSummary, label_scope
from prisma_core.interpret.labelling.scores import (
    ScoreBaseline,
    ScoreSummary,
    label_quality,
    score_baseline,
    score_run,
)

__all__ = [
    "PROMPT_OVERHEAD_TOKENS",
    "FeatureGroup",
    "LabelConfig",
    "LabelPlan",
    "LabelScope",
    "LabelSummary",
    "ScopeSummary",
    "ScoreBaseline",
    "ScoreSummary",
    "StopCheck",
    "group_documents",
    "label_group",
    "label_groups",
    "label_quality",
    "label_run",
    "label_scope",
    "never_stop",
    "plan_labels",
    "score_baseline",
    "score_run",
]
