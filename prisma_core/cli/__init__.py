"""Command line: `python -m prisma_core <stage> ...`. Stage flags are generated from the stage configs.

The stages (`pipeline`, `labelling`) are imported inside the commands that run them, so `--help` or `list` never
import torch or sentence-transformers (tests/core/test_cli.py checks which libraries each command imports).

Where things live: `flags` (flags made from the configs and read back), `output` (progress bars and what the
commands print), one module of commands per subject (`dataset_commands`, `run_commands`, `edit_commands`,
`label_commands`), and `parser` (the parser and `main`)."""

from prisma_core.cli.flags import add_config_flags, config_from_args
from prisma_core.cli.parser import build_parser, main

__all__ = ["add_config_flags", "build_parser", "config_from_args", "main"]
