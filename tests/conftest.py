import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from built_once import built_once
from streamlit.runtime.pages_manager import PagesManager

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
CORPORA = Path(os.environ.get("PRISMA_CORPORA", REPO.parent / "shared" / "corpora"))
MARKS_BY_PATH = {
    "app": ["slow"],
    "benchmarks": ["slow"],
    "browser": ["browser"],
    "core/test_int8.py": ["slow"],  # quantizes the real model into a fresh cache: about a minute
    "reliability": ["slow"],
    "reliability/test_reliability_load.py": ["load"],
}
"""Markers given to every test under a folder or in a file of tests/ (pyproject.toml says what each marker means)."""
SLOW_FIXTURES = {"bbc_workspace", "bbc_embeddings"}
"""A test that uses one of these waits for the whole BBC corpus to be embedded, or trains on it: it is slow."""
GROUPED_FIXTURES = {"bbc_workspace"}
"""A test that uses one of these must be in the group of the files that share it (WORKER_GROUPS)."""
WHOLE_BBC, RAY_HEAD_NODES, APP_WORKSPACE, LABELLING_RUN = (
    "whole BBC corpus",
    "Ray head nodes",
    "app workspace",
    "labelling run",
)
WORKER_GROUPS = {
    "app/": APP_WORKSPACE,  # `trained_app`, trained through the app
    **dict.fromkeys(["benchmarks/", "scale/"], RAY_HEAD_NODES),  # one head node on the machine at a time
    "core/interpret/": LABELLING_RUN,
    **{f"core/test_{name}.py": WHOLE_BBC for name in ("cli", "compare")},
    "reliability/test_reliability_load.py": WHOLE_BBC,
}
"""Files (or folders) whose tests share an expensive session fixture, or must not run at the same time. With several
workers (`--dist loadgroup`, as scripts/test.sh runs the suite) a worker takes a whole group, so its fixture is built
once; every other file is a group of its own. pytest-xdist's own `xdist_group` mark does not group under pytest 9 (it
rewrites `item._nodeid`, which pytest 9 no longer reads), hence the scheduler below."""


S3_WORKSPACE = "store_s3/test_s3_workspace.py"
"""Its two writers can wait about two minutes at once on the loopback S3 server (SeaweedFS, seen in two of three full
runs on 2026-12-08: no request logged by the server, the CPU idle, then the writes go on), so it starts early too,
while the other worker has work to fill that wait."""
LONGEST_GROUPS = [WHOLE_BBC, RAY_HEAD_NODES, APP_WORKSPACE, S3_WORKSPACE, LABELLING_RUN]
"""Started first (longest first), so that no long group is left to run alone at the end of a run on two workers."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    where_in_tests = {item: item.path.relative_to(TESTS).as_posix() for item in items}
    items.sort(key=lambda item: longest_first(worker_group(where_in_tests[item])))
    for item in items:
        where = where_in_tests[item]
        for prefix, marks in MARKS_BY_PATH.items():
            if where == prefix or where.startswith(f"{prefix}/"):
                for mark in marks:
                    item.add_marker(mark)
        fixtures = set(getattr(item, "fixturenames", ()))
        if SLOW_FIXTURES & fixtures:
            item.add_marker("slow")
            if GROUPED_FIXTURES & fixtures and worker_group(where) != WHOLE_BBC:
                raise pytest.UsageError(f"{item.nodeid} needs the whole BBC corpus: add its file to WORKER_GROUPS")


def longest_first(group: str) -> int:
    return LONGEST_GROUPS.index(group) if group in LONGEST_GROUPS else len(LONGEST_GROUPS)


def worker_group(where: str) -> str:
    """The group of the tests in `where` (a path under tests/): what one worker runs together."""
    return next((group for prefix, group in WORKER_GROUPS.items() if where.startswith(prefix)), where)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """`--dist loadgroup` with the groups of WORKER_GROUPS: each group is one unit of work for one worker, handed out
    in the order of collection (the longest groups first), not by their number of tests."""
    if config.getvalue("dist") != "loadgroup":
        return None
    config.option.loadscopereorder = False
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid.split("::")[0].removeprefix("tests/"))

    return SharedFixtureScheduling(config, log)


@pytest.fixture(autouse=True)
def app_routes_like_a_running_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """AppTest runs the app the way a running server does: routed by app.py's st.navigation.

    Before every AppTest run Streamlit re-detects the `pages/` folder and routes that run with its legacy pages/
    router, which a server uses for its very first run only (app.py's st.navigation turns it off for good). The
    legacy router can run a page without app.py, so the sidebar and the page switches the app makes would be lost.
    """
    detect = PagesManager.__init__

    def detect_then_use_navigation(self: PagesManager, *args: object, **kwargs: object) -> None:
        detect(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    monkeypatch.setattr(PagesManager, "__init__", detect_then_use_navigation)


@pytest.fixture(autouse=True)
def jobs_keep_the_tests_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's background jobs run at the test's own priority, not niced +10 (prisma_core/pipeline/jobs.py).

    The niceness keeps an analyst's page responsive on a server. In the suite, where another worker and its child
    processes keep both cores busy, a niced job thread got a tenth of a core: the demo took 185 s instead of 20 s.
    tests/ui/test_app_ui.py checks the niceness itself."""
    monkeypatch.setattr("prisma_core.pipeline.jobs.JOB_NICENESS", 0)


@pytest.fixture(scope="session")
def corpora_dir() -> Path:
    assert CORPORA.is_dir(), f"real corpora not found at {CORPORA} (set PRISMA_CORPORA)"
    return CORPORA


@pytest.fixture(scope="session")
def bbc(corpora_dir: Path) -> pd.DataFrame:
    return pd.read_parquet(corpora_dir / "bbc_news.parquet")


@pytest.fixture(scope="session")
def mtsamples(corpora_dir: Path) -> pd.DataFrame:
    return pd.read_parquet(corpora_dir / "mtsamples.parquet")


@pytest.fixture(scope="session")
def ag_news(corpora_dir: Path) -> pd.DataFrame:
    return pd.read_parquet(corpora_dir / "ag_news_test.parquet")


@pytest.fixture(scope="session")
def bbc_subset(tmp_path_factory: pytest.TempPathFactory, bbc: pd.DataFrame) -> np.ndarray:
    """Real embeddings [600, 384] of the first 600 BBC headlines (a few words each: cheap to embed, so the tests of
    training mechanics run in the fast tier)."""
    from prisma_core.embed import embed_texts

    return built_once(tmp_path_factory, "bbc_subset", lambda _: embed_texts(bbc["title"].head(600).tolist()))


@pytest.fixture(scope="session")
def small_run(tmp_path_factory: pytest.TempPathFactory, bbc: pd.DataFrame):
    """60 BBC articles ingested, embedded and trained with a small SAE through the pipeline, once per test run
    (tests/helpers/small_run.py, shared by the workers); tests that change it take a copy."""
    from small_run import build_small_run

    return built_once(tmp_path_factory, "small_run", lambda folder: build_small_run(folder, bbc))


@pytest.fixture(scope="session")
def dated_run(tmp_path_factory: pytest.TempPathFactory, bbc: pd.DataFrame):
    """300 BBC articles with a column of dates in which business rises and tech falls, trained once per test run
    from the shared corpus's cached vectors (tests/helpers/dated_run.py); tests that change it take a copy."""
    from dated_run import build_dated_run

    return built_once(tmp_path_factory, "dated_run", lambda folder: build_dated_run(folder, bbc))


@pytest.fixture(scope="session")
def bbc_openings(tmp_path_factory: pytest.TempPathFactory, bbc: pd.DataFrame):
    """The openings of 300 BBC articles (60 per desk, 150 words each) ingested and embedded once per test run
    (tests/helpers/bbc_openings.py, shared by the workers); tests that change the workspace take a copy, others read
    its vectors."""
    from bbc_openings import build_bbc_openings

    return built_once(tmp_path_factory, "bbc_openings", lambda folder: build_bbc_openings(folder, bbc))


@pytest.fixture(scope="session")
def bbc_workspace(tmp_path_factory: pytest.TempPathFactory, corpora_dir: Path):
    """A workspace holding the whole BBC corpus, embedded once per test session with the bundled model, for the tests
    that train runs through the pipeline. Not from the shared corpus's vectors: a run's evidence step needs every
    document's passages, which the shared files do not hold, and computing them costs a pass of the model as long as
    embedding the documents with them (1.3 times longer in the shared vectors' fp32 space than at the int8 `auto`
    chooses here)."""
    from prisma_core import pipeline

    workspace, dataset_id = whole_bbc_ingested(tmp_path_factory.mktemp("bbc_workspace"), corpora_dir)
    pipeline.embed_dataset(workspace, dataset_id)
    return workspace, dataset_id


@pytest.fixture(scope="session")
def bbc_embeddings(tmp_path_factory: pytest.TempPathFactory, corpora_dir: Path) -> np.ndarray:
    """Real chunk-and-average embeddings of all 2,225 BBC articles, [2225, 384] float32: the shared corpus's vectors
    of the bundled model, through a workspace's embedding cache (nothing is embedded), once per test run, for the
    tests of training and themes on vectors."""
    from cached_vectors import embed_from_shared_vectors

    from prisma_core.embed import model_key

    def build(folder: Path) -> np.ndarray:
        workspace, dataset_id = whole_bbc_ingested(folder, corpora_dir)
        return workspace.vectors(dataset_id, model_key(embed_from_shared_vectors(workspace, dataset_id, "bbc_news")))

    return built_once(tmp_path_factory, "bbc_embeddings", build)


def whole_bbc_ingested(folder: Path, corpora_dir: Path):
    """A new workspace in `folder` with the whole BBC corpus ingested (ids from its `id` column): (workspace, dataset
    id)."""
    from prisma_core import pipeline
    from prisma_core.ingest import IngestConfig
    from prisma_core.store import Workspace

    workspace = Workspace(folder)
    dataset_id, _ = pipeline.ingest(
        workspace, [corpora_dir / "bbc_news.parquet"], "bbc", IngestConfig(text_column="text", id_column="id")
    )
    return workspace, dataset_id
