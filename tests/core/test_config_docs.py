"""Setting help texts come from the docstrings under each config field, for the CLI and the app alike."""

import argparse
import dataclasses
import re
import threading
import tomllib
from pathlib import Path

import pytest

import prisma_core
from prisma_core.cli import build_parser
from prisma_core.config_docs import field_docs
from prisma_core.embed import EmbedConfig
from prisma_core.families import FamilyConfig
from prisma_core.ingest import IngestConfig
from prisma_core.interpret.keywords import KeywordConfig
from prisma_core.interpret.label_scores import ScoreConfig
from prisma_core.interpret.labelling import LabelConfig
from prisma_core.interpret.ollama_labeller import OllamaConfig
from prisma_core.sae import SAEConfig
from prisma_core.themes import ThemeConfig


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
    assert f"--embed-batch-size EMBED_BATCH_SIZE {field_docs(EmbedConfig)['batch_size']} (default: 16)" in shown


def test_every_option_of_every_command_explains_itself_in_help():
    parser = build_parser()
    (commands,) = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    undocumented = [
        f"{name} {option}"
        for name, command in commands.choices.items()
        for action in command._actions
        for option in action.option_strings[:1]
        if not action.help or action.help.startswith("(default:")
    ]
    assert undocumented == []
    assert len(commands.choices) == 10


@pytest.mark.parametrize(
    "config_type",
    [
        SAEConfig,
        FamilyConfig,
        EmbedConfig,
        ThemeConfig,
        KeywordConfig,
        ScoreConfig,
        OllamaConfig,
        LabelConfig,
        IngestConfig,
    ],
)
def test_every_config_documents_every_field_with_a_docstring(config_type):
    assert all(field_docs(config_type).values())


def test_the_version_is_written_once_in_the_package_and_read_by_the_project_file():
    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "prisma_core.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", prisma_core.__version__)
