"""The settings of the command line's `edit` and `carry` commands (see `prisma_core.curation.edits` and
`prisma_core.carryover.carry`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from prisma_core.config_docs import CheckedConfig, setting
from prisma_core.sae.config import MAX_FEATURES


@dataclass(frozen=True)
class EditConfig(CheckedConfig):
    settings_name = "edit"

    action: Literal["list", "rename", "merge", "split", "hide", "pin", "undo"] = setting(
        "list",
        doc="What to do: list the run's edits; rename a concept (--name); merge themes (--id, --themes); "
        "split a theme into its sub-themes (each becomes a theme); hide a concept from every view, the "
        "export and the report; pin it to the top; undo an edit (--edit-id: shows a hidden concept again, "
        "lifts a pin, gives the old name back).",
    )
    level: Literal["theme", "subtheme", "family", "feature"] = setting(
        "theme", doc="The level of the concept edited. A sub-theme is renamed or pinned (it is hidden with its theme)."
    )
    id: int | None = setting(
        None,
        minimum=0,
        maximum=MAX_FEATURES,
        doc="The id of the concept edited (a theme, sub-theme, family or feature number, as `list` and the "
        "app show it); for a merge, the theme the others join.",
    )
    name: str = setting("", doc="The new name, for a rename.")
    description: str = setting("", doc="A description stored with the new name (optional).")
    themes: str = setting(
        "", doc="For a merge: the ids of the themes merged into --id, separated by commas (e.g. 3,4)."
    )
    edit_id: str = setting("", doc="For an undo: the edit's id, as `--action list` shows it.")


@dataclass(frozen=True)
class CarryConfig(CheckedConfig):
    settings_name = "carry"

    from_run: str | None = setting(
        None,
        doc="The earlier run whose edits are carried (default: the newest earlier run of the same dataset with edits).",
    )
