"""Flags made from the stage configs, and the configs read back from the flags given."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Collection, Sequence
from typing import Any

from prisma_core.pipeline import PrismaError, SettingsError, Workspace
from prisma_core.pipeline.intake import guess_id_column, preview_paths
from prisma_core.pipeline.settings import EmbedConfig, IngestConfig, SAEConfig, field_docs, field_kind, literal_values


def add_config_flags(
    parser: argparse.ArgumentParser, config_type: type, prefix: str = "", omit: Collection[str] = ()
) -> None:
    """One `--field-name` flag per dataclass field, typed, defaulting to None (= the config's own default); none
    for the fields in `omit` (settings the command does not use)."""
    docs = field_docs(config_type)
    group = parser.add_argument_group(config_type.__name__)
    for field in dataclasses.fields(config_type):
        if field.metadata.get("cli") is False or field.name in omit:
            continue  # e.g. an API key: read from the environment, never typed where shell history keeps it
        flag = "--" + (("" if field.metadata.get("unprefixed_flag") else prefix) + field.name).replace("_", "-")
        kind, choices = field_kind(config_type, field.name), list(literal_values(config_type, field.name)) or None
        shown_default = "" if field.default is dataclasses.MISSING else f" (default: {field.default})"
        help_text = f"{docs[field.name]}{shown_default}".strip().replace("%", "%%")
        if kind is bool:
            group.add_argument(
                flag, dest=prefix + field.name, action=argparse.BooleanOptionalAction, default=None, help=help_text
            )
        else:
            group.add_argument(flag, dest=prefix + field.name, type=kind, choices=choices, default=None, help=help_text)


def config_from_args(config_type: type, args: argparse.Namespace, prefix: str = "", base: Any = None) -> Any:
    """The config from the flags given; fields without a flag keep `base`'s value (or the config's default).

    A setting out of range raises SettingsError (its config's own check)."""
    given = {f.name: getattr(args, prefix + f.name, None) for f in dataclasses.fields(config_type)}
    given = {name: value for name, value in given.items() if value is not None}
    try:
        return dataclasses.replace(base, **given) if base is not None else config_type(**given)
    except PrismaError:
        raise
    except ValueError as error:
        raise SettingsError(f"{config_type.__name__}: {error}") from None


def flag_prefix(config: type, together: Sequence[type]) -> str:
    """Embedding flags get an `embed-` prefix where they share a command with the SAE's (batch size, device)."""
    return "embed_" if config is EmbedConfig and SAEConfig in together else ""


def chosen_dataset(workspace: Workspace, args: argparse.Namespace) -> str:
    """The --dataset given, else the workspace's newest dataset."""
    if args.dataset:
        return args.dataset
    datasets = workspace.datasets()
    if not datasets:
        raise PrismaError("The workspace has no dataset yet: run `python -m prisma_core ingest FILE...` first.")
    return datasets[-1].dataset_id


def ingest_config(args: argparse.Namespace) -> IngestConfig:
    """The ingest flags; without --id-column, the id column is guessed from the first rows as the Datasets page
    pre-selects it (a column named like an id with unique values), else row numbers."""
    config = config_from_args(IngestConfig, args)
    if config.id_column is not None:
        return config
    return dataclasses.replace(config, id_column=guess_id_column(preview_paths(args.files)))


def feature_ids(text: str) -> list[int]:
    """`--features 1,2,3`."""
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected feature ids separated by commas, like 1,2,3; got {text!r}"
        ) from None
