"""Setting help texts come from the `doc` each config field declares with `setting`, for the CLI and the app alike."""

import argparse
import dataclasses
import re
import threading
import tomllib
from pathlib import Path

import pytest

import prisma_core
from prisma_core.cli import build_parser
from prisma_core.cli.flags import add_config_flags
from prisma_core.concepts.families import FamilyConfig
from prisma_core.concepts.themes import ThemeConfig
from prisma_core.config_docs import CheckedConfig, field_docs, field_kind, field_metadata, setting
from prisma_core.curation.edit_config import CarryConfig, EditConfig
from prisma_core.embed import EmbedConfig
from prisma_core.errors import SettingsError
from prisma_core.ingest import IngestConfig
from prisma_core.interpret.keywords import KeywordConfig
from prisma_core.interpret.label_scores import ScoreConfig
from prisma_core.interpret.ollama_config import OllamaConfig
from prisma_core.pipeline.labelling import LabelConfig
from prisma_core.pipeline.report.config import ReportConfig
from prisma_core.sae import SAEConfig
from prisma_core.trends.config import TrendConfig


def test_every_sae_setting_has_its_reference_text():
    docs = field_docs(SAEConfig)
    assert list(docs) == [field.name for field in dataclasses.fields(SAEConfig)]
    assert docs["k"].startswith("Active features per document (the TopK)")
    assert all(docs.values())
    assert field_docs(FamilyConfig)["tau"].startswith("Drop feature pairs whose normalised co-occurrence")
    assert "\n" not in field_docs(SAEConfig)["dead_after"]


def test_a_reference_text_is_kept_with_its_whitespace_folded_and_a_secret_is_neither_shown_compared_nor_a_flag():
    @dataclasses.dataclass(frozen=True)
    class Demo(CheckedConfig):
        size: int = setting(3, minimum=1, doc="How many,\n    at least one.")
        key: str | None = setting(None, secret=True, doc="A key.")

    assert field_docs(Demo) == {"size": "How many, at least one.", "key": "A key."}
    assert Demo(key="a") == Demo(key="b") and "key" not in repr(Demo(key="hidden"))
    parser = argparse.ArgumentParser()
    add_config_flags(parser, Demo)
    assert "--size" in parser.format_help() and "--key" not in parser.format_help()
    with pytest.raises(SettingsError, match=r"^Invalid stage settings: size must be a whole number of at least 1"):
        Demo(size=0)


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
    assert f"--k K {field_docs(SAEConfig)['k']} (default: {SAEConfig().k})" in shown
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
    assert len(commands.choices) == 18


CONFIGS = [
    SAEConfig,
    FamilyConfig,
    EmbedConfig,
    ThemeConfig,
    KeywordConfig,
    ScoreConfig,
    OllamaConfig,
    LabelConfig,
    IngestConfig,
    ReportConfig,
    TrendConfig,
]


@pytest.mark.parametrize("config_type", CONFIGS)
def test_every_config_documents_every_field(config_type):
    assert all(field_docs(config_type).values())


@pytest.mark.parametrize(
    ("config_type", "name", "value"),
    [
        (SAEConfig, "nested_levels", 0),
        (ThemeConfig, "n_themes", 1),
        (ThemeConfig, "n_themes", 101),
        (ThemeConfig, "member_share", 0.0),
        (ThemeConfig, "member_share", 1.5),
        (KeywordConfig, "n_terms", 0),
        (KeywordConfig, "min_class_share", 0.0),
        (KeywordConfig, "diversity", 1.5),
        (KeywordConfig, "min_document_frequency", 0),
        (ScoreConfig, "n_shown", -1),
        (ScoreConfig, "n_detect_negatives", 0),
        (OllamaConfig, "timeout_s", 0.0),
        (OllamaConfig, "max_doc_tokens", 15),
        (OllamaConfig, "n_contrast", -1),
        (LabelConfig, "max_consecutive_failures", 0),
        (LabelConfig, "max_family_children", -1),
        (IngestConfig, "max_rows", 0),
        (IngestConfig, "max_file_bytes", -5),
        (ReportConfig, "max_q", 0.0),
        (ReportConfig, "map_points", 50),
    ],
)
def test_each_config_refuses_a_value_outside_its_declared_range_naming_the_setting(config_type, name, value):
    with pytest.raises(SettingsError, match=rf"^Invalid .* settings: {name} must be .*, got {value}\.$"):
        config_type(**{name: value})


BOUND_NEEDS = {(SAEConfig, "k_compared"): {"k": field_metadata(SAEConfig, "k")["maximum"]}}
"""Other settings a setting's bounds are tried with: k_compared may be at most k."""


@pytest.mark.parametrize("config_type", CONFIGS)
def test_every_declared_bound_is_accepted_and_a_step_beyond_it_refused(config_type):
    checked = 0
    for field in dataclasses.fields(config_type):
        bounds = field_metadata(config_type, field.name)
        for bound, inclusive, outside in (("minimum", True, -1), ("above", False, 0), ("maximum", True, 1)):
            value = bounds.get(bound)
            if value is None:
                continue
            step = 1 if field_kind(config_type, field.name) is int else 0.01 * max(abs(value), 1e-6)
            beside = BOUND_NEEDS.get((config_type, field.name), {})
            if inclusive:
                config_type(**beside, **{field.name: value})
            with pytest.raises(SettingsError, match=f"{field.name} must be"):
                config_type(**beside, **{field.name: value + outside * step})
            checked += 1
    assert checked > 0


def test_checks_beyond_ranges_stay_with_their_config():
    with pytest.raises(SettingsError, match="max_positives must be at least min_positives"):
        ScoreConfig(min_positives=10, max_positives=5)
    with pytest.raises(SettingsError, match="host must not be empty"):
        OllamaConfig(host=" ")
    with pytest.raises(SettingsError, match="must be a whole number"):
        IngestConfig(max_rows=10.5)


def test_the_version_is_written_once_in_the_package_and_read_by_the_project_file():
    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "prisma_core.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", prisma_core.__version__)


def test_the_configuration_page_names_every_stage_config_and_every_variable_prisma_reads():
    repo = Path(__file__).parents[2]
    page = (repo / "docs" / "configuration.md").read_text(encoding="utf-8")
    sources = [*(repo / "prisma_core").rglob("*.py"), *(repo / "ui").rglob("*.py"), *(repo / "pages").glob("*.py")]
    variables = {
        name
        for source in sources
        for name in re.findall(r"\b(?:PRISMA|OLLAMA|AWS)_[A-Z][A-Z_]*[A-Z]\b", source.read_text(encoding="utf-8"))
    }
    configs = {config.__name__ for config in (*CONFIGS, EditConfig, CarryConfig)}
    assert {"PRISMA_WORKSPACE", "OLLAMA_API_KEY", "AWS_ENDPOINT_URL"} <= variables
    assert sorted(name for name in variables | configs if f"`{name}`" not in page) == []
