"""The parser (one subcommand per command, its flags made from the configs it uses) and `main`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from prisma_core.cli.dataset_commands import (
    cmd_add,
    cmd_delete,
    cmd_embed,
    cmd_ingest,
    cmd_list,
    cmd_place,
    cmd_repair,
)
from prisma_core.cli.edit_commands import cmd_carry, cmd_edit
from prisma_core.cli.flags import add_config_flags, config_from_args, feature_ids, flag_prefix
from prisma_core.cli.label_commands import cmd_label, cmd_score
from prisma_core.cli.run_commands import (
    cmd_export,
    cmd_families,
    cmd_report,
    cmd_run,
    cmd_themes,
    cmd_train,
    cmd_trends,
)
from prisma_core.pipeline import PrismaError, Workspace
from prisma_core.pipeline.labelling import LabelConfig, OllamaConfig
from prisma_core.pipeline.settings import (
    CarryConfig,
    EditConfig,
    EmbedConfig,
    FamilyConfig,
    IngestConfig,
    ReportConfig,
    SAEConfig,
    ScoreConfig,
    ThemeConfig,
    TrendConfig,
)

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130
NAME_HELP = "dataset name (default: the first file's name without its extension)"
EMBEDDING_ONLY = ("ray_address", "ray_workers")
"""EmbedConfig settings only embedding a dataset uses: `train` reads stored vectors and embeds its keyword labels on
this machine, so it does not offer them."""


CREATING_COMMANDS = ("ingest", "run")
"""The commands that make a new workspace where none is; the others refuse a folder that does not exist."""
DATASET_HELP = "dataset id (default: the newest)"
RUN_HELP = "run id (default: the newest)"
Commands = Any  # argparse's subparsers action (a private type)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m prisma_core", description="Prisma: interpretable embeddings.")
    commands = parser.add_subparsers(dest="command", required=True)
    _add_dataset_commands(commands)
    _add_run_commands(commands)
    _add_label_commands(commands)
    return parser


def _command(
    commands: Commands, name: str, help_text: str, handler: Any, *configs: type, omit: Collection[str] = ()
) -> argparse.ArgumentParser:
    sub = commands.add_parser(name, help=help_text)
    sub.add_argument(
        "--workspace",
        help="workspace folder or object store prefix s3://bucket/folder (default: $PRISMA_WORKSPACE or ./prisma_data)",
    )
    for config in configs:
        add_config_flags(sub, config, flag_prefix(config, configs), omit)
    sub.set_defaults(handler=handler, configs=configs)
    return sub


def _add_dataset_commands(commands: Commands) -> None:
    ingest = _command(commands, "ingest", "read files into a new dataset", cmd_ingest, IngestConfig)
    ingest.add_argument("files", nargs="+", type=Path)
    ingest.add_argument("--name", help=NAME_HELP)
    embed = _command(commands, "embed", "embed a dataset (chunk-and-average, cached)", cmd_embed, EmbedConfig)
    embed.add_argument("--dataset", help=DATASET_HELP)
    help_text = "add files' documents to a dataset and place them in its runs (no retraining)"
    add = _command(commands, "add", help_text, cmd_add)
    add.add_argument("files", nargs="+", type=Path)
    add.add_argument("--dataset", help=DATASET_HELP)
    help_text = "place documents added to a dataset in the runs that lack them (after an interrupted add)"
    place = _command(commands, "place", help_text, cmd_place)
    place.add_argument("--dataset", help=DATASET_HELP)
    configs = (IngestConfig, EmbedConfig, SAEConfig, FamilyConfig, ThemeConfig)
    run = _command(commands, "run", "ingest, embed and train with defaults", cmd_run, *configs)
    run.add_argument("files", nargs="+", type=Path)
    run.add_argument("--name", help=NAME_HELP)
    run.add_argument("--out", type=Path, help="also export the run to this folder")


def _add_run_commands(commands: Commands) -> None:
    configs = (SAEConfig, EmbedConfig, FamilyConfig, ThemeConfig)
    train = _command(
        commands, "train", "train an SAE run with themes, labels and families", cmd_train, *configs, omit=EMBEDDING_ONLY
    )
    train.add_argument("--dataset", help=DATASET_HELP)
    families = _command(commands, "families", "recompute the families of a run", cmd_families, FamilyConfig)
    families.add_argument("--run", help=RUN_HELP)
    help_text = "regroup a run's features into themes and sub-themes (e.g. --n-themes 8 --n-subthemes 30)"
    themes = _command(commands, "themes", help_text, cmd_themes, ThemeConfig)
    themes.add_argument("--run", help=RUN_HELP)
    export = _command(commands, "export", "write a run's results to a folder", cmd_export)
    export.add_argument("--run", help=RUN_HELP)
    export.add_argument("--out", required=True, type=Path, help="folder to write the files into (new or empty)")
    help_text = "write a run's report: one HTML file to share, opened in any browser without a server"
    report = _command(commands, "report", help_text, cmd_report, ReportConfig)
    report.add_argument("--run", help=RUN_HELP)
    report.add_argument("--out", required=True, type=Path, help="the HTML file to write, e.g. report.html")
    help_text = "how common each concept is per period of a date column, and which rise or fall beyond chance (CSV)"
    trends = _command(commands, "trends", help_text, cmd_trends, TrendConfig)
    trends.add_argument("--run", help=RUN_HELP)
    trends.add_argument("--out", required=True, type=Path, help="the CSV file to write, e.g. trends.csv")
    _command(commands, "list", "list datasets and runs", cmd_list)
    help_text = "rename, merge, hide or pin a run's concepts, list its edits or undo one"
    edit = _command(commands, "edit", help_text, cmd_edit, EditConfig)
    edit.add_argument("--run", help=RUN_HELP)
    help_text = "carry an earlier run's edits to a run trained again, and compare their concepts"
    carry = _command(commands, "carry", help_text, cmd_carry, CarryConfig)
    carry.add_argument("--run", help="the run the edits go to (default: the newest)")
    help_text = (
        "check every table in full; remove a damaged table's unreadable files (intact rows kept), restore lost records"
    )
    _command(commands, "repair", help_text, cmd_repair)
    delete = _command(commands, "delete", "delete a dataset (with its runs) or a run", cmd_delete)
    delete.add_argument("--dataset", help="the dataset to delete, with its runs")
    delete.add_argument("--run", help="the run to delete")


def _add_label_commands(commands: Commands) -> None:
    help_text = "name features (and families, themes) with an Ollama model"
    label = _command(commands, "label", help_text, cmd_label, OllamaConfig, LabelConfig)
    help_text = "score every label (embedding; detection with --detect)"
    score = _command(commands, "score", help_text, cmd_score, ScoreConfig, OllamaConfig)
    for sub in (label, score):
        sub.add_argument("--ollama-host", dest="host", help="Ollama server URL (same as --host; default: $OLLAMA_HOST)")
        sub.add_argument("--run", help=RUN_HELP)
        sub.add_argument("--features", type=feature_ids, help="only these feature ids, e.g. 1,2,3 (default: all)")
    label.add_argument("--families", action="store_true", help="also name the families, after the features")
    label.add_argument(
        "--themes",
        action="store_true",
        help="also name the themes and their sub-themes, after the features (and families)",
    )
    score.add_argument("--detect", action="store_true", help="also run the LLM detection check on LLM labels")


def check_settings(args: argparse.Namespace) -> None:
    """Builds every config of the command once before any work, so a bad setting fails before anything runs."""
    for config in args.configs:
        config_from_args(config, args, flag_prefix(config, args.configs))
    if getattr(args, "out", None) and args.command == "run":
        from prisma_core import pipeline

        pipeline.export_target(Workspace(args.workspace), args.out)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        check_settings(args)
        args.handler(Workspace(args.workspace, create=args.command in CREATING_COMMANDS), args)
    except PrismaError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("interrupted: nothing half-written is kept", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0
