"""The chain every entry point runs to make a run from documents: ingest -> embed -> train.

The command line's `run`, the one-click demo and the tests' small run all call `ingest_embed_train`, so the
stages are chained (and the SAE settings chosen) in one place."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from prisma_core.concepts.families import FamilyConfig
from prisma_core.concepts.themes import ThemeConfig
from prisma_core.embed import EmbedConfig
from prisma_core.ingest import IngestConfig, IngestReport, Source
from prisma_core.pipeline.dataset import EmbedSummary, embed_dataset, ingest
from prisma_core.pipeline.training import RunSummary, suggested_sae_config, train_run
from prisma_core.progress import ProgressCallback, ignore_progress
from prisma_core.sae import SAEConfig
from prisma_core.store import Workspace

SaeChoice = SAEConfig | Callable[[SAEConfig], SAEConfig] | None
"""The SAE settings: given, made from the settings suggested for the dataset (e.g. explicit flags on top of them),
or None for the suggested settings themselves."""


@dataclass(frozen=True)
class NewDataset:
    """Files (paths, or (name, bytes) uploads) to read into a new dataset."""

    files: Sequence[str | Path] | Sequence[Source]
    name: str | None = None  # None: the first file's name without its extension
    config: IngestConfig = field(default_factory=IngestConfig)


@dataclass(frozen=True)
class Ingested:
    dataset_id: str
    report: IngestReport


Finished = Ingested | EmbedSummary | RunSummary
"""What one stage of the chain made, announced as soon as it is stored."""


@dataclass(frozen=True)
class ChainResult:
    dataset_id: str
    ingested: Ingested | None  # None: the chain started from an existing dataset
    embedded: EmbedSummary
    run: RunSummary

    @property
    def run_id(self) -> str:
        return self.run.run_id


def ignore_finished(_: Finished) -> None:
    """Default `on_finished` for callers that report only at the end."""


def ingest_embed_train(
    workspace: Workspace,
    dataset: NewDataset | str,
    embed_config: EmbedConfig = EmbedConfig(),
    sae_config: SaeChoice = None,
    family_config: FamilyConfig = FamilyConfig(),
    theme_config: ThemeConfig = ThemeConfig(),
    progress: ProgressCallback = ignore_progress,
    on_finished: Callable[[Finished], None] = ignore_finished,
) -> ChainResult:
    """Ingest `dataset` (or start from the existing dataset of that id), embed it and train a run on it.

    Each stage stores its artefacts and records before the next starts, so a failure keeps what came before (a
    dataset, its vectors) and leaves no partial run; `on_finished` hears of each stage as it ends."""
    ingested = _ingested(workspace, dataset, progress)
    if ingested is not None:
        on_finished(ingested)
    dataset_id = ingested.dataset_id if ingested is not None else str(dataset)
    embedded = embed_dataset(workspace, dataset_id, embed_config, progress)
    on_finished(embedded)
    sae = _sae_config(workspace, dataset_id, embed_config, sae_config)
    run = train_run(
        workspace, dataset_id, sae, embed_config, family_config, theme_config=theme_config, progress=progress
    )
    on_finished(run)
    return ChainResult(dataset_id, ingested, embedded, run)


def _ingested(workspace: Workspace, dataset: NewDataset | str, progress: ProgressCallback) -> Ingested | None:
    if isinstance(dataset, str):
        return None
    return Ingested(*ingest(workspace, dataset.files, dataset.name, dataset.config, progress))


def _sae_config(workspace: Workspace, dataset_id: str, embed_config: EmbedConfig, choice: SaeChoice) -> SAEConfig:
    if isinstance(choice, SAEConfig):
        return choice
    suggested = suggested_sae_config(workspace, dataset_id, embed_config)
    return suggested if choice is None else choice(suggested)
