"""The small embedded corpus that core tests share: the openings of 300 BBC articles (the first 60 of each desk, cut
to their first 150 words: one model window each) ingested and embedded with the bundled model into a real LanceDB
workspace, once per test session (the `bbc_openings` fixture in tests/conftest.py). A test that writes to the
workspace works on its own copy; one that only needs the vectors reads them."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from prisma_core import pipeline
from prisma_core.embed import EmbedConfig, model_key
from prisma_core.ingest import IngestConfig
from prisma_core.store import Workspace

PER_DESK = 60
OPENING_WORDS = 150


@dataclass(frozen=True)
class BbcOpenings:
    path: Path  # the workspace folder: read it, or copy() it to change it
    dataset_id: str
    corpus: pd.DataFrame  # the ingested articles in stored order (the index is the position): id, title, text, label

    def copy(self, to: Path) -> Workspace:
        """A private copy of the workspace at `to`, to change without touching other tests' corpus."""
        shutil.copytree(self.path, to)
        return Workspace(to)

    def vectors(self) -> np.ndarray:
        """[300, 384] float32: the stored document vectors, in the corpus's order."""
        return Workspace(self.path).vectors(self.dataset_id, model_key(EmbedConfig()))


def openings(articles: pd.DataFrame) -> pd.DataFrame:
    """The articles with each text cut to its first OPENING_WORDS words."""
    return articles.assign(text=[" ".join(text.split()[:OPENING_WORDS]) for text in articles["text"]])


def build_bbc_openings(folder: Path, bbc: pd.DataFrame) -> BbcOpenings:
    corpus = openings(bbc.groupby("label").head(PER_DESK)).reset_index(drop=True)
    corpus.to_parquet(folder / "bbc300.parquet")
    workspace = Workspace(folder / "workspace")
    dataset_id, _ = pipeline.ingest(workspace, [folder / "bbc300.parquet"], "bbc 300", IngestConfig(id_column="id"))
    pipeline.embed_dataset(workspace, dataset_id)
    assert workspace.documents(dataset_id, ["doc_id"])["doc_id"].tolist() == corpus["id"].tolist()
    return BbcOpenings(workspace.path, dataset_id, corpus)
