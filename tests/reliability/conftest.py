"""Fixtures shared by the reliability tests."""

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from ollama_server import FakeOllama, running_fake_ollama
from reliability_helpers import Trained

from prisma_core.store import Workspace


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory, bbc: pd.DataFrame, small_run) -> Trained:
    """60 BBC articles with a mixed `year` column, trained once per worker and shared by the tests of several files
    (as it was by all the tests of the one file they came from): no test changes what another one reads. Some of them
    change the workspace, so it is not shared between workers; its vectors come from the small run's."""
    return Trained(tmp_path_factory.mktemp("trained"), bbc, vectors_from=Workspace(small_run.path))


@pytest.fixture
def fake_ollama() -> Iterator[FakeOllama]:
    with running_fake_ollama() as fake:
        yield fake


@pytest.fixture
def workspace(small_run, tmp_path: Path) -> Workspace:
    """A private copy of the session's small run (60 BBC articles, one trained run); test_reliability_inputs.py has
    its own `workspace`, a module's workspace holding one dataset."""
    return small_run.copy(tmp_path / "workspace")
