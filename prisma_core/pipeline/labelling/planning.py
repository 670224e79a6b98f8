"""Planning a label batch: which features, families and themes it would ask about, and roughly what it costs."""

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from prisma_core.errors import NotFoundError
from prisma_core.interpret.ollama_client import has_model
from prisma_core.interpret.ollama_config import OllamaConfig
from prisma_core.interpret.prompts import CHARS_PER_TOKEN, PROMPT_VERSION
from prisma_core.pipeline.labelling.job import LabelConfig
from prisma_core.reading.runs import LoadedRun
from prisma_core.store import Workspace

PROMPT_SAMPLE = 200
"""First documents whose mean length estimates a prompt's size (read by position: a large dataset is never read
whole for an estimate)."""


@dataclass(frozen=True)
class LabelPlan:
    n_features: int  # features the batch will ask the model about
    n_features_skipped: int  # already labelled by this model and prompt version (resume skips them)
    n_inactive: int  # selected features that never fire: nothing to label
    n_families: int  # families the batch will ask about
    n_families_skipped: int
    prompt_tokens: int  # estimated tokens the model will read, all requests together
    n_themes: int = 0  # themes the batch will ask about
    n_themes_skipped: int = 0
    n_subthemes: int = 0  # sub-themes of those themes (split into two or more) the batch will ask about
    n_subthemes_skipped: int = 0

    @property
    def n_requests(self) -> int:
        return self.n_features + self.n_families + self.n_themes + self.n_subthemes


def plan_labels(
    workspace: Workspace,
    run: LoadedRun,
    ollama: OllamaConfig,
    config: LabelConfig = LabelConfig(),
    feature_ids: Sequence[int] | None = None,
    family_ids: Sequence[int] | None = (),
    theme_ids: Sequence[int] | None = (),
) -> LabelPlan:
    """What `label_run` (on `feature_ids`, all by default), `label_groups` (families on `family_ids`, then
    themes on `theme_ids`; for both, none by default and all with None) would ask, from what is stored now. Sends
    nothing to Ollama."""
    record = run.record
    selected = selected_features(len(run.features), feature_ids)
    wanted = [f for f in selected if run.features["density"].iat[f] > 0]
    done = set() if config.relabel else labelled_by(workspace.labels.of(record.run_id), ollama.model)
    todo = [f for f in wanted if f not in done]
    families = chosen([asdict(family) for family in workspace.groups.families(record.run_id)], "family_id", family_ids)
    family_todo = [f for f in families if config.relabel or not has_model([f["label_source"]], ollama.model)]
    themes = chosen(workspace.groups.themes(record.run_id), "theme_id", theme_ids)
    theme_todo = [t for t in themes if asked(t, "features", config, ollama.model)]
    subthemes = chosen(
        workspace.groups.subthemes(record.run_id), "subtheme_id", subthemes_of(workspace, run, theme_ids)
    )
    subtheme_todo = [s for s in subthemes if asked(s, "features", config, ollama.model)]
    first = np.arange(min(PROMPT_SAMPLE, run.codes.shape[0]))
    sample = workspace.documents_at(record.dataset_id, first, ["position", "text"])["text"]
    mean_tokens = int(sample.str.len().mean() / CHARS_PER_TOKEN) if len(sample) else 0
    document_tokens = min(ollama.max_doc_tokens, mean_tokens)
    per_request = PROMPT_OVERHEAD_TOKENS + (ollama.n_evidence + ollama.n_contrast) * document_tokens
    return LabelPlan(
        n_features=len(todo),
        n_features_skipped=len(wanted) - len(todo),
        n_inactive=len(selected) - len(wanted),
        n_families=len(family_todo),
        n_families_skipped=len(families) - len(family_todo),
        prompt_tokens=per_request * (len(todo) + len(family_todo) + len(theme_todo) + len(subtheme_todo)),
        n_themes=len(theme_todo),
        n_themes_skipped=len(themes) - len(theme_todo),
        n_subthemes=len(subtheme_todo),
        n_subthemes_skipped=len(subthemes) - len(subtheme_todo),
    )


def subthemes_of(workspace: Workspace, run: LoadedRun, theme_ids: Sequence[int] | None) -> list[int]:
    """The sub-themes named with themes `theme_ids` (all with None): those of the run's themes split into two or
    more (a theme's only sub-theme is the theme itself, named with it)."""
    if theme_ids is not None and not len(theme_ids):
        return []
    rows = workspace.groups.subthemes(run.record.run_id)
    per_theme = pd.Series([int(row["theme_id"]) for row in rows]).value_counts()
    wanted = None if theme_ids is None else {int(t) for t in theme_ids}
    return [
        int(row["subtheme_id"])
        for row in rows
        if per_theme[int(row["theme_id"])] >= 2 and (wanted is None or int(row["theme_id"]) in wanted)
    ]


def asked(group: dict[str, Any], members_key: str, config: LabelConfig, model: str) -> bool:
    """Whether a batch asks `model` to name a group: it holds members to name it from (a theme or sub-theme whose
    features all fit another better holds none) and has no name from the model yet, unless relabelling."""
    return bool(len(group[members_key])) and (config.relabel or not has_model([group["label_source"]], model))


def chosen(groups: list[dict[str, Any]], id_key: str, ids: Sequence[int] | None) -> list[dict[str, Any]]:
    """The groups named in `ids` (all of them with None)."""
    if ids is None:
        return groups
    wanted = {int(i) for i in ids}
    return [g for g in groups if int(g[id_key]) in wanted]


PROMPT_OVERHEAD_TOKENS = 300
"""Instructions, tags and (for a family) member labels around the documents of one request."""


def selected_features(n_features: int, feature_ids: Sequence[int] | None) -> list[int]:
    """The requested feature ids (all by default), sorted, each checked to exist."""
    if feature_ids is None:
        return list(range(n_features))
    selected = sorted({int(feature) for feature in feature_ids})
    unknown = [feature for feature in selected if not 0 <= feature < n_features]
    if unknown:
        raise NotFoundError(
            f"This run has features 0 to {n_features - 1}; there is no feature {', '.join(map(str, unknown))}."
        )
    return selected


def labelled_by(interpretations: pd.DataFrame, source: str, version: str = PROMPT_VERSION) -> set[int]:
    """Features holding a label from this source (a model: a missing tag meaning ':latest') and prompt version (the
    current prompts by default)."""
    same = interpretations["source"].map(lambda stored: has_model([stored], source))
    current = interpretations["prompt_version"] == version
    return set(interpretations.loc[same & current, "feature_id"].astype(int))
