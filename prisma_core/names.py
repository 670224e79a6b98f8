"""How concepts are named wherever they are shown (the app's pickers, tables and charts, the report): light enough
(pandas only) for every page to import."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

LEVEL_WORDS = {"theme": "Theme", "subtheme": "Sub-theme", "family": "Family", "feature": "Feature"}
LEVEL_PLURALS = {"theme": "themes", "subtheme": "sub-themes", "family": "families", "feature": "features"}
SNIPPET_CHARS = 220
NO_THEME_NAME = "(no theme)"


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
