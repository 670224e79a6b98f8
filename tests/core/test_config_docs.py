"""Setting help texts come from the docstrings under each config field, for the CLI and the app alike."""

import dataclasses
import threading

import pytest

from prisma_core.cli import build_parser
from prisma_core.config_docs import field_docs
from prisma_core.embed import EmbedConfig
from prisma_core.families import FamilyConfig
from prisma_core.sae import SAEConfig


def test_every_sae_setting_has_its_docstring():
    docs = field_docs(SAEConfig)
    assert list(docs) == [field.name for field in dataclasses.fields(SAEConfig)]
    assert docs["k"].startswith("Active features per document (the TopK)")
    assert all(docs.values())
    assert field_docs(FamilyConfig)["tau"].startswith("Drop feature pairs whose normalised co-occurrence")
    assert "\n" not in field_docs(SAEConfig)["dead_after"]


def test_a_class_that_is_not_a_dataclass_is_refused():
    with pytest.raises(TypeError, match="not a dataclass"):
        field_docs(int)


def test_many_sessions_reading_help_at_once_all_get_the_same_texts():
    """The app renders pages for several sessions in parallel threads; each must get the full help texts."""
    expected = {config: field_docs(config) for config in (SAEConfig, FamilyConfig, EmbedConfig)}
    results, errors = [], []

    def read() -> None:
        try:
            for _ in range(50):
                results.append({config: field_docs(config) for config in expected})
        except Exception as error:  # collected so the assertion shows it
            errors.append(repr(error))

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(results) == 400 and all(result == expected for result in results)


def test_cli_help_shows_the_same_texts_with_defaults(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert f"--k K {field_docs(SAEConfig)['k']} (default: 32)" in shown
    assert f"--tau TAU {field_docs(FamilyConfig)['tau']} (default: 0.1)" in shown
    assert "--embed-batch-size EMBED_BATCH_SIZE Chunks per forward pass. (default: 64)" in shown
