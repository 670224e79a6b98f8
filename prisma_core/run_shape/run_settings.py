"""A run's settings read once from its record into the stage configs (the record keeps the JSON it was stored
with: the export and the report's settings table show it as written)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from prisma_core.concepts.families import FamilyConfig
from prisma_core.concepts.themes import ThemeConfig
from prisma_core.embed.config import EmbedConfig
from prisma_core.errors import SettingsError
from prisma_core.interpret.keywords import KeywordConfig
from prisma_core.sae.config import SAEConfig
from prisma_core.store import RunRecord


@dataclass(frozen=True)
class RunSettings:
    """The settings a run was made with: its training's, and its families' and themes' as shown when read from the
    record `runs.current_settings` gives."""

    sae: SAEConfig | None
    """None when the record does not say what today's settings say: it has no SAE settings, or it gives an expansion
    factor of the embedding's size (runs trained before runs counted their features) and was read without that
    size."""
    embed: EmbedConfig
    keywords: KeywordConfig
    families: FamilyConfig
    themes: ThemeConfig


def run_settings(record: RunRecord, dim: int | None = None) -> RunSettings:
    """The record's settings; a section missing from a record of an older version (themes, before runs had them)
    takes its config's defaults. `dim`: the size of the run's embeddings, which reads the SAE settings of runs
    trained before runs counted their features. Raises SettingsError, naming the run, for a section that is not a
    set of its config's settings within their ranges."""
    try:
        config = _mapping(record.config, "run")
        return RunSettings(
            sae=_sae(config, dim),
            embed=EmbedConfig.from_dict(_section(config, "embed")),
            keywords=KeywordConfig.from_dict(_section(config, "keywords")),
            families=FamilyConfig.from_dict(_section(config, "families")),
            themes=ThemeConfig.from_dict(_section(config, "themes")),
        )
    except SettingsError as error:
        raise SettingsError(f"The settings recorded with run {record.run_id} cannot be read: {error}") from None


def _sae(config: Mapping[str, Any], dim: int | None) -> SAEConfig | None:
    values = _section(config, "sae")
    if not values or ("expansion_factor" in values and dim is None):
        return None
    return SAEConfig.from_dict(values, dim)


def _section(config: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    return _mapping(config.get(name, {}), name)


def _mapping(values: object, name: str) -> Mapping[str, Any]:
    if not isinstance(values, Mapping):
        raise SettingsError(f"the {name} settings are {values!r}, not settings by name.")
    return values
