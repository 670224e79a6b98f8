"""Helpers for the AppTest modules: a fresh app session, page switching, waiting for background jobs, reading
elements as the user sees them. The shared workspace fixtures are in app_fixtures.py."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
from streamlit.testing.v1 import AppTest

from prisma_core import pipeline
from prisma_core.concepts.evidence import marked_pieces, passages_carrying
from prisma_core.reading.runs import LoadedRun
from prisma_core.store import Workspace
from ui.state import PENDING_SELECTION_KEY, job_registry
from ui.text import highlighted

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "app.py")
N_DOCUMENTS = 150
SMALL_SAE = {"n_features": 64, "k": 4, "epochs": 10, "batch_size": 32}
JOB_TIMEOUT = 600
SCRIPT_TIMEOUT = 120


def new_app(dataset_id: str | None = None, run_id: str | None = None) -> AppTest:
    """A fresh session on Home; with a dataset (and run) preselected as if picked in the sidebar."""
    at = AppTest.from_file(APP, default_timeout=SCRIPT_TIMEOUT)
    if dataset_id:
        at.session_state[PENDING_SELECTION_KEY] = (dataset_id, run_id)
    return at.run()  # the first run registers the pages of st.navigation


def open_page(at: AppTest, page: str) -> AppTest:
    """Switch to pages/<page>.py and run it."""
    return at.switch_page(f"pages/{page}.py").run()


def wait_for_job(key: str) -> None:
    """Block until the app's background job `key` has finished; fail with its error if it failed."""
    job = job_registry().wait(key, JOB_TIMEOUT)
    assert job is not None, f"no job {key!r} was started"
    assert not job.running, f"job {key!r} still running after {JOB_TIMEOUT} s"
    assert job.error is None, job.error_message


def texts(elements) -> list[str]:
    """The text of each element as the user reads it (markdown escapes removed)."""
    return [re.sub(r"\\(.)", r"\1", str(element.value)) for element in elements]


def refracted_text(at: AppTest, workspace: Workspace, run: LoadedRun, position: int, text: str) -> None:
    """Explore shows the refracted document's `text` in full, with the passages that carry the concept picked to
    highlight highlighted ("Where in the document"; Streamlit drops the spaces of blank lines)."""
    feature = at.selectbox(key=f"refract_highlight_{position}").value
    carrying = passages_carrying(pipeline.document_passage_features(workspace, run, position), feature)
    expected = highlighted(marked_pieces(text, carrying)).split()
    assert [element.value.split() for element in at.markdown if element.value.split() == expected] == [expected]


def table(at: AppTest, *columns: str, exact: bool = False) -> pd.DataFrame:
    """The one dataframe on the page holding these columns (all of its columns when exact)."""
    found = tables(at, *columns, exact=exact)
    assert len(found) == 1, f"{len(found)} dataframes with columns {sorted(columns)}"
    return found[0]


def tables(at: AppTest, *columns: str, exact: bool = False) -> list[pd.DataFrame]:
    """Every dataframe on the page holding these columns, in page order (AppTest knows only the keys of tables
    that can be selected from, so tables are found by their columns)."""
    wanted = set(columns)
    return [
        frame.value
        for frame in at.dataframe
        if (set(frame.value.columns) == wanted if exact else wanted <= set(frame.value.columns))
    ]


def bbc_csv(corpora_dir: Path, n: int = N_DOCUMENTS) -> tuple[pd.DataFrame, bytes]:
    """n BBC articles, every category represented, as the CSV an analyst would upload."""
    frame = pd.read_parquet(corpora_dir / "bbc_news.parquet").sample(n, random_state=0).reset_index(drop=True)
    frame = frame.rename(columns={"label": "category"})[["id", "title", "category", "text"]]
    return frame, frame.to_csv(index=False).encode()


def features_table(at: AppTest) -> pd.DataFrame:
    """The Features page's table (its key changes with the search and with label edits)."""
    (found,) = [frame.value for frame in at.dataframe if (frame.key or "").startswith("features_table:")]
    return found
