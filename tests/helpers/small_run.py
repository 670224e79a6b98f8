"""The small real run that core tests share: 60 BBC articles (12 per category) ingested, embedded with the bundled
model and trained with a small SAE through the pipeline, once per test session (the `small_run` fixture in
tests/conftest.py). A test that changes the workspace works on its own copy."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from prisma_core import pipeline
from prisma_core.ingest import IngestConfig
from prisma_core.pipeline import EmbedSummary, RunSummary
from prisma_core.progress import Progress
from prisma_core.sae import SAEConfig
from prisma_core.store import Workspace

SMALL_SAE = SAEConfig(n_features=32, k=4, epochs=3, batch_size=32)
PER_CATEGORY = 12


@dataclass(frozen=True)
class SmallRun:
    path: Path  # the workspace folder: read it, or copy() it to change it
    corpus: Path  # the parquet file that was ingested (whole articles)
    dataset_id: str
    embedded: EmbedSummary  # the first embedding of the dataset: every vector computed
    run: RunSummary
    stages: frozenset[str]  # every stage name the pipeline reported progress under while building the run

    def copy(self, to: Path) -> Workspace:
        """A private copy of the workspace at `to`, to change without touching other tests' run."""
        shutil.copytree(self.path, to)
        return Workspace(to)


def build_small_run(folder: Path, bbc: pd.DataFrame) -> SmallRun:
    corpus = folder / "bbc60.parquet"
    bbc.groupby("label").head(PER_CATEGORY).to_parquet(corpus)
    workspace = Workspace(folder / "workspace")
    stages: set[str] = set()

    def record(event: Progress) -> None:
        stages.add(event.stage)

    documents = pipeline.NewDataset([corpus], "bbc small", IngestConfig(id_column="id"))
    chained = pipeline.ingest_embed_train(workspace, documents, sae_config=SMALL_SAE, progress=record)
    return SmallRun(workspace.path, corpus, chained.dataset_id, chained.embedded, chained.run, frozenset(stages))
