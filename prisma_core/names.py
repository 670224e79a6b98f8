"""How concepts are named wherever they are shown (the app's pickers, tables and charts, the report): light enough
(pandas only) for every page to import."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

import pandas as pd

from prisma_core.errors import SettingsError

LEVEL_WORDS = {"theme": "Theme", "subtheme": "Sub-theme", "family": "Family", "feature": "Feature"}
LEVEL_PLURALS = {"theme": "themes", "subtheme": "sub-themes", "family": "families", "feature": "features"}
SNIPPET_CHARS = 220
NO_THEME_NAME = "(no theme)"
MAX_NAME_CHARS = 120
"""The longest name stored, whoever gives it: a label, a theme's, family's or dataset's name."""
MAX_DESCRIPTION_CHARS = 600
"""The longest description an analyst can store with a name."""
_BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069\u200b\ufeff]")
"""Directional embeddings, overrides and isolates, a zero-width space and a byte-order mark: invisible, and able to
turn the text around them."""
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800\u180e")
"""Letters and symbols that draw nothing (Hangul fillers, the blank Braille pattern...)."""
_UNSEEN_CATEGORIES = ("C", "Z", "M")
"""Unicode categories that draw nothing on their own: controls and formats, separators, combining marks."""


def checked_name(name: str, what: str = "A name", limit: int = MAX_NAME_CHARS) -> str:
    """A name an analyst gives (a label, a theme's or a dataset's name) as stored: on one line, without control
    characters or directional overrides. SettingsError when nothing of it would show, or past `limit` characters."""
    cleaned = plain_line(name)
    if not any(_shows(char) for char in cleaned):
        raise SettingsError(f"{what} must hold something visible: write a name first.")
    if len(cleaned) > limit:
        raise SettingsError(f"{what} holds at most {limit} characters (this one: {len(cleaned):,}); shorten it.")
    return cleaned


def checked_description(description: str) -> str:
    """A description an analyst gives with a name, cleaned as names are; it may be empty."""
    cleaned = plain_line(description)
    if len(cleaned) > MAX_DESCRIPTION_CHARS:
        raise SettingsError(
            f"A description holds at most {MAX_DESCRIPTION_CHARS} characters (this one: {len(cleaned):,}); shorten it."
        )
    return cleaned


def plain_line(text: str) -> str:
    """Text on one line: control characters and directional overrides removed, whitespace collapsed."""
    without = _BIDI_CONTROLS.sub("", str(text))
    return " ".join("".join(" " if unicodedata.category(char) == "Cc" else char for char in without).split())


def isolated(text: str) -> str:
    """Text to put among other text (a name in a sentence, a cell of a table): without NUL and other control
    characters (line breaks and tabs kept) or directional overrides, and, when it holds right-to-left letters,
    wrapped in a first-strong isolate, so that it can never reorder the text around it."""
    without = _BIDI_CONTROLS.sub("", text)
    if any(unicodedata.category(char) == "Cc" and char not in "\n\t" for char in without):
        without = "".join(
            " " if unicodedata.category(char) == "Cc" and char not in "\n\t" else char for char in without
        )
    if any(unicodedata.bidirectional(char) in ("R", "AL") for char in without):
        return f"\u2068{without}\u2069"
    return without


def _shows(char: str) -> bool:
    return not unicodedata.category(char).startswith(_UNSEEN_CATEGORIES) and char not in _BLANK_LETTERS


def level_word(level: str) -> str:
    """A level inside a sentence: "sub-theme"."""
    return LEVEL_WORDS[level].lower()


def unit_names(level: str, units: pd.DataFrame) -> dict[int, str]:
    """Column of a level's matrix -> how its unit is named (plain text): "Theme 2: label", "Family 14: label" or
    `feature_name`. The i-th unit names column i at every level: a feature's column is not its id once features are
    hidden. units: the level's units (unit, label), as `explore.level_units` gives them."""
    pairs = zip(units["unit"].tolist(), units["label"].tolist(), strict=True)
    if level == "feature":
        return {i: feature_name(unit, label) for i, (unit, label) in enumerate(pairs)}
    return {i: unit_name(level, unit, label) for i, (unit, label) in enumerate(pairs)}


def feature_names(features: pd.DataFrame) -> dict[int, str]:
    """feature id -> `feature_name`, for the features (feature_id, label) given."""
    pairs = zip(features["feature_id"].tolist(), features["label"].tolist(), strict=True)
    return {int(feature): feature_name(feature, label) for feature, label in pairs}


def unit_name(level: str, unit: int, label: object) -> str:
    """A theme, sub-theme or family named with its number: "Theme 2: surgery · incision" (plain text)."""
    return f"{LEVEL_WORDS[level]} {int(unit)}: {label}"


def theme_names(theme_info: pd.DataFrame, theme_ids: Iterable[int]) -> dict[int, str]:
    """theme id -> `unit_name` of the theme (NO_THEME_NAME for a document's missing theme, -1), for the ids given.
    theme_info: the run's themes (theme_id, label)."""
    labels = theme_info.set_index("theme_id")["label"]
    return {int(t): unit_name("theme", t, labels.get(t)) if t >= 0 else NO_THEME_NAME for t in set(theme_ids)}


def feature_name(feature_id: int, label: object) -> str:
    """How a feature is named in pickers, tables and charts: "#12 chest pain, cough" (plain text, not markdown)."""
    return f"#{int(feature_id)} {own_label(feature_id, label)}".strip()


def own_label(feature_id: int, label: object) -> str:
    """A feature's label where its number is shown beside it: a label that ends with the feature's own number
    ("(no shared words) #12", kept unique that way) without it."""
    shown = "" if label is None or (not isinstance(label, str) and pd.isna(label)) else str(label)
    return shown.removesuffix(f" #{int(feature_id)}")


def snippet(text: object, limit: int = SNIPPET_CHARS) -> str:
    """The start of a document on one line, for tables."""
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
