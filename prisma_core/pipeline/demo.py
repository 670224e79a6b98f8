"""The demo corpora: clinical notes written for Prisma's demo and shipped with it (the default: no network), and
MTSamples (CC0), fetched once from a public mirror and kept in the workspace (the larger, optional demo).

The bundled sample (`demo_notes.jsonl`, beside this module) holds 150 short notes in six specialties, written for
this project and released with it under CC0: fictional patients, no real records. MTSamples (mtsamples.com
transcription samples, scraped by T. Boyle and published on Kaggle under CC0 1.0) is mirrored on the Hugging Face
Hub as a CSV. On first use the file is downloaded into `<workspace>/demo/`; later runs read that copy. Where there
is no network, `DemoConfig.local_file` names a local copy (CSV or Parquet, either the Kaggle columns or
id/title/text/label) that is read instead.
"""

from __future__ import annotations

import functools
import io
import os
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import pandas as pd

from prisma_core import pipeline
from prisma_core.errors import IngestError
from prisma_core.ingest import IngestConfig, Source
from prisma_core.progress import Progress, ProgressCallback, ignore_progress
from prisma_core.store import Workspace

DEMO_URL = "https://huggingface.co/datasets/NickyNicky/medical_mtsamples/resolve/main/mtsamples%20(1).csv"
DEMO_SOURCE_PAGE = "https://huggingface.co/datasets/NickyNicky/medical_mtsamples"
DEMO_LICENCE = "CC0 1.0 (public domain), MTSamples.com via Kaggle (T. Boyle)"
DEMO_NAME = "MTSamples demo"
SAMPLE_NAME = "Clinical notes demo"
DEMO_NAMES = (SAMPLE_NAME, DEMO_NAME)
"""The names of the demo's datasets: the bundled sample's, then MTSamples'."""
SAMPLE_FILE = Path(__file__).with_name("demo_notes.jsonl")
SAMPLE_DESCRIPTION = "clinical notes written for this demo (fictional patients, CC0), shipped with Prisma"
MTSAMPLES_DOCUMENTS = 400
DEMO_FILE_ENV = "PRISMA_DEMO_FILE"
DEMO_DOCS_ENV = "PRISMA_DEMO_DOCS"
DEMO_INGEST = IngestConfig(text_column="text", id_column="id", title_column="title")
"""How the demo source (see `demo_source`) is read into a dataset."""
_CACHE_NAME = "mtsamples.csv"
_STAGE = "demo"
_MIN_WORDS = 50  # shorter "notes" are stubs (headers, one-line referrals)
_COLUMN_ALIASES = {
    "text": ("text", "transcription"),
    "title": ("title", "sample_name"),
    "specialty": ("specialty", "label", "medical_specialty"),
}


class DemoDownloadError(IngestError):
    """The demo corpus could not be downloaded (no network, or the mirror is unreachable); a local copy can be
    given instead (`DemoConfig.local_file`, or `save_local_copy`)."""


DemoCorpus = Literal["sample", "mtsamples"]


@functools.cache
def sample_size() -> int:
    """Notes in the bundled sample."""
    return sum(1 for line in SAMPLE_FILE.read_text(encoding="utf-8").splitlines() if line.strip())


@dataclass(frozen=True)
class DemoConfig:
    corpus: DemoCorpus = "sample"
    """"sample": the notes shipped with Prisma, read offline; "mtsamples": MTSamples, downloaded once (or
    `local_file`)."""
    n_documents: int | None = None
    """Notes sampled for the demo (at most the bundled sample's); None: the whole bundled sample, or 400 MTSamples
    notes (enough for readable features, small enough to train in a few minutes on a CPU)."""
    seed: int = 0
    """Seeds the sample, so every demo shows the same notes."""
    local_file: str | None = None
    """A local copy of MTSamples (CSV or Parquet) read instead of downloading, e.g. on machines without network."""
    url: str = DEMO_URL
    """Where the corpus is downloaded from on first use."""
    timeout_s: float = 60.0
    """Seconds to wait for the download server to answer."""

    def __post_init__(self) -> None:
        if self.n_documents is not None and self.n_documents < 50:
            raise ValueError(f"n_documents must be at least 50, got {self.n_documents}")
        if self.local_file and self.corpus != "mtsamples":
            raise ValueError("local_file is a copy of MTSamples: it needs corpus='mtsamples'")

    @property
    def size(self) -> int:
        """The number of notes the demo uses."""
        if self.corpus == "sample":
            return min(self.n_documents or sample_size(), sample_size())
        return self.n_documents or MTSAMPLES_DOCUMENTS

    @property
    def dataset_name(self) -> str:
        return SAMPLE_NAME if self.corpus == "sample" else DEMO_NAME

    def larger(self) -> DemoConfig:
        """The optional larger demo: MTSamples, downloaded once."""
        return replace(self, corpus="mtsamples")

    @classmethod
    def from_settings(cls, settings: dict[str, str | None] | None = None) -> DemoConfig:
        """Read PRISMA_DEMO_FILE / PRISMA_DEMO_DOCS from `settings` (e.g. app secrets), then the environment. A
        local copy of MTSamples makes it the demo's corpus; without one the demo reads the bundled sample."""
        values = {name: os.environ.get(name) for name in (DEMO_FILE_ENV, DEMO_DOCS_ENV)}
        values |= {name: value for name, value in (settings or {}).items() if value}
        n_documents = values.get(DEMO_DOCS_ENV)
        local_file = values.get(DEMO_FILE_ENV) or None
        return cls(
            corpus="mtsamples" if local_file else "sample",
            n_documents=int(n_documents) if n_documents else None,
            local_file=local_file,
        )


def demo_corpus(
    cache_dir: str | Path, config: DemoConfig = DemoConfig(), progress: ProgressCallback = ignore_progress
) -> pd.DataFrame:
    """The demo notes as a table: id, title, specialty, text; `config.size` of them, sampled with the seed.

    Raises IngestError, saying what to do, when the corpus can be neither read locally nor downloaded.
    """
    progress(Progress(_STAGE, 0, 1, "Reading the demo corpus"))
    raw = _read_table(*_raw_corpus(Path(cache_dir), config))
    notes = _normalised(raw)
    if len(notes) < config.size:
        raise IngestError(f"The demo corpus holds {len(notes)} usable notes; ask for {len(notes)} or fewer.")
    sample = notes.sample(config.size, random_state=config.seed).sort_values("id")
    progress(Progress(_STAGE, 1, 1, f"{len(sample)} notes sampled"))
    return sample.reset_index(drop=True)


def demo_source(
    cache_dir: str | Path, config: DemoConfig = DemoConfig(), progress: ProgressCallback = ignore_progress
) -> Source:
    """The demo sample as an upload, (file name, Parquet bytes), to be read with DEMO_INGEST."""
    buffer = io.BytesIO()
    demo_corpus(cache_dir, config, progress).to_parquet(buffer, index=False)
    prefix = "clinical_notes" if config.corpus == "sample" else "mtsamples"
    return f"{prefix}_{config.size}.parquet", buffer.getvalue()


def _raw_corpus(cache_dir: Path, config: DemoConfig) -> tuple[str, bytes]:
    """(file name, bytes) of the whole corpus: the bundled sample; for MTSamples the configured local file, else the
    cached download, else download."""
    if config.corpus == "sample":
        return SAMPLE_FILE.name, SAMPLE_FILE.read_bytes()
    if config.local_file:
        path = Path(config.local_file).expanduser()
        if not path.is_file():
            raise IngestError(f"The demo file {path} (setting {DEMO_FILE_ENV}) does not exist.")
        return path.name, path.read_bytes()
    cached = cache_dir / _CACHE_NAME
    if not cached.is_file():
        _download(config.url, cached, config.timeout_s)
    return cached.name, cached.read_bytes()


def _download(url: str, target: Path, timeout: float) -> None:
    """Writes to a temporary name first, so an interrupted download never looks like a cached corpus."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            partial.write_bytes(response.read())
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        partial.unlink(missing_ok=True)
        raise DemoDownloadError(
            f"Could not download the demo corpus from {url} ({error}). Without network, set {DEMO_FILE_ENV} to a "
            "local copy of MTSamples (CSV or Parquet)."
        ) from error
    partial.replace(target)


def save_local_copy(cache_dir: str | Path, name: str, data: bytes) -> int:
    """Keep an analyst's copy of MTSamples (CSV or Parquet, e.g. Kaggle's mtsamples.csv) as the demo corpus, so the
    demo runs without network. Returns the number of usable notes; raises IngestError when it is not MTSamples."""
    notes = _normalised(_read_table(name, data))
    if notes.empty:
        raise IngestError(f"{name} holds no usable notes (each needs at least {_MIN_WORDS} words).")
    target = Path(cache_dir) / _CACHE_NAME
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    _read_table(name, data).to_csv(partial, index=False)
    partial.replace(target)
    return len(notes)


def existing_demo(workspace: Workspace, config: DemoConfig = DemoConfig()) -> tuple[str, str] | None:
    """(dataset id, run id) of a finished demo of this size already in the workspace, else None."""
    existing = [d for d in workspace.datasets() if d.name == config.dataset_name and d.n_documents == config.size]
    if existing and workspace.runs(existing[-1].dataset_id):
        return existing[-1].dataset_id, workspace.run_or_latest(None, existing[-1].dataset_id).run_id
    return None


def _read_table(name: str, data: bytes) -> pd.DataFrame:
    try:
        if name.lower().endswith(".parquet"):
            return pd.read_parquet(io.BytesIO(data))
        if name.lower().endswith(".jsonl"):
            return pd.read_json(io.BytesIO(data), lines=True, dtype=False)
        return pd.read_csv(io.BytesIO(data))
    except (ValueError, OSError) as error:
        raise IngestError(f"The demo file {name} could not be read as CSV or Parquet ({error}).") from error


def _normalised(raw: pd.DataFrame) -> pd.DataFrame:
    """Kaggle columns (transcription, sample_name, medical_specialty) or ours (text, title, label) -> one shape.

    Empty, duplicate and stub notes are dropped, as in the curated copy under ../shared/corpora.
    """
    columns = {}
    for target, aliases in _COLUMN_ALIASES.items():
        found = next((alias for alias in aliases if alias in raw.columns), None)
        if found is None:
            raise IngestError(f"The demo file has no {' or '.join(aliases)} column; is it MTSamples?")
        columns[target] = raw[found].astype("string").str.strip()
    notes = pd.DataFrame(columns)
    notes["id"] = raw["id"].astype("string") if "id" in raw else [f"mts-{row:04d}" for row in range(len(raw))]
    notes["text"] = notes["text"].map(_tidy, na_action="ignore")
    notes = notes.dropna(subset=["text"])
    notes = notes[notes["text"].str.split().str.len() >= _MIN_WORDS].drop_duplicates("text")
    return notes[["id", "title", "specialty", "text"]].reset_index(drop=True)


def _tidy(text: str) -> str:
    """The Kaggle export glues section headers to commas ("HISTORY:,The patient"); restore "HISTORY: The"."""
    return re.sub(r":\s*,\s*", ": ", text).strip()


def run_demo(
    workspace: Workspace, config: DemoConfig = DemoConfig(), progress: ProgressCallback = ignore_progress
) -> tuple[str, str]:
    """The one-click demo: sample the corpus, ingest, embed and train with settings suited to its size.

    Returns (dataset id, run id). A demo dataset of the same size already in the workspace is reused, and so is
    its latest run, so a second demo opens at once.
    """
    done = existing_demo(workspace, config)
    if done is not None:
        return done
    existing = [d for d in workspace.datasets() if d.name == config.dataset_name and d.n_documents == config.size]
    dataset = existing[-1].dataset_id if existing else _new_demo_dataset(workspace, config, progress)
    chained = pipeline.ingest_embed_train(workspace, dataset, progress=progress)
    return chained.dataset_id, chained.run_id


def _new_demo_dataset(workspace: Workspace, config: DemoConfig, progress: ProgressCallback) -> pipeline.NewDataset:
    source = demo_source(workspace.path / "demo", config, progress)
    return pipeline.NewDataset([source], config.dataset_name, DEMO_INGEST)
