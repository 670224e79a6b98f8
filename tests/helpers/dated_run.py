"""A run whose dataset has a column of dates in which chosen desks rise and fall (planted as bench.trends plants
them): 400 BBC articles (80 per desk) uploaded as a CSV with a `published` column over 12 months written day first
("25/03/2004"), a few articles undated; business articles become nine times as common from the first month to the
last, tech articles fall by as much, the other desks stay flat. Their vectors come from the shared corpus's cached
vectors through the workspace's embedding cache (no document vector is computed; the run's evidence step computes
their passages); a small SAE is trained through the pipeline.
Built once per test session (the `dated_run` fixture in tests/conftest.py); a test that changes it takes a copy."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from cached_vectors import embed_from_shared_vectors

from bench.trends import plant_dates
from prisma_core import pipeline
from prisma_core.ingest import IngestConfig
from prisma_core.sae import SAEConfig
from prisma_core.store import Workspace

PER_DESK = 80
DESKS = ("business", "entertainment", "politics", "sport", "tech")
RISING, FALLING = "business", "tech"
UNDATED = 6
MONTHS = 12
EFFECT = 0.8
SAE = SAEConfig(n_features=48, k=4, epochs=8, batch_size=32)


@dataclass(frozen=True)
class DatedRun:
    path: Path  # the workspace folder
    dataset_id: str
    run_id: str
    frame: pd.DataFrame  # the uploaded rows, in file order (published: the dates as written, None when undated)
    dates: pd.Series  # the planted dates, NaT when undated


def build_dated_run(folder: Path, bbc: pd.DataFrame) -> DatedRun:
    frame = bbc.groupby("label").head(PER_DESK).reset_index(drop=True)[["id", "title", "text", "label"]]
    desks = frame["label"].map({desk: i for i, desk in enumerate(DESKS)}).to_numpy()
    dates, _ = plant_dates(desks, {DESKS.index(RISING): EFFECT}, DESKS.index(FALLING), seed=0, n_months=MONTHS)
    dates[np.random.default_rng(1).choice(len(frame), UNDATED, replace=False)] = pd.NaT
    frame["published"] = dates.dt.strftime("%d/%m/%Y").where(dates.notna(), None)
    frame.to_csv(folder / "bbc_dated.csv", index=False)
    workspace = Workspace(folder / "workspace")
    config = IngestConfig(text_column="text", id_column="id", title_column="title")
    dataset_id, _ = pipeline.ingest(workspace, [folder / "bbc_dated.csv"], "BBC dated", config)
    embed_config = embed_from_shared_vectors(workspace, dataset_id, "bbc_news")
    summary = pipeline.train_run(workspace, dataset_id, sae_config=SAE, embed_config=embed_config)
    return DatedRun(workspace.path, dataset_id, summary.run_id, frame, dates)
