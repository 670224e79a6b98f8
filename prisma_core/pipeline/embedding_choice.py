"""The embedding settings a dataset is embedded (and its run trained and labelled) with: `auto`'s faster precision
only where a sample of this dataset's own documents stays faithful to fp32 (embed/faithful.py); every stage that
names a dataset's vector space asks here, so they all name the same one."""

from __future__ import annotations

from collections.abc import Callable

from prisma_core.embed import EmbedConfig
from prisma_core.embed.faithful import (
    PrecisionChoice,
    cached_choice,
    fast_candidates,
    sample_positions,
    unchecked_choice,
)
from prisma_core.store import Workspace
from prisma_core.store.stages import EMBEDDING


def precision_choice(
    workspace: Workspace, dataset_id: str, config: EmbedConfig, before_check: Callable[[], None] = lambda: None
) -> PrecisionChoice:
    """The backend and precision the dataset is embedded with under `config`, and why: checked on up to
    `faithful.SAMPLE_DOCUMENTS` of its documents, spread over it, where `auto` has a faster candidate (the verdict is
    kept: seconds the first time, nothing after); as set or as `auto` resolves elsewhere. A dataset embedded before
    keeps the choice its embedding recorded, so documents added since do not move it to another vector space.
    `before_check`: called before a check loads the models."""
    if not fast_candidates(config):
        return unchecked_choice(config)
    recorded = _recorded_choice(workspace, dataset_id, config)
    if recorded is not None:
        return recorded
    positions = sample_positions(workspace.dataset(dataset_id).n_documents)
    texts = workspace.documents_at(dataset_id, positions, ["position", "text"])["text"].tolist()
    return cached_choice(config, texts, before_check)


def dataset_config(workspace: Workspace, dataset_id: str, config: EmbedConfig) -> EmbedConfig:
    """`config` at the backend and precision chosen for the dataset; unchanged (still `auto`, as recorded) where
    nothing needed checking."""
    if not fast_candidates(config):
        return config
    return precision_choice(workspace, dataset_id, config).config(config)


SPACE_SETTINGS = ("model", "precision", "backend", "device")
"""The settings that decide a vector space (with the choice made under them)."""


def _recorded_choice(workspace: Workspace, dataset_id: str, config: EmbedConfig) -> PrecisionChoice | None:
    """The choice the dataset's newest embedding under these settings recorded, if any."""
    wanted = {name: getattr(config, name) for name in SPACE_SETTINGS}
    for record in reversed(workspace.stage_records.of(dataset_id)):
        same = {name: record.config.get(name) for name in SPACE_SETTINGS} == wanted
        if record.stage == EMBEDDING and record.summary.get("choice") and same:
            return PrecisionChoice(**record.summary["choice"])
    return None
