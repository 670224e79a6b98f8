"""User content (document text, titles, labels) is always shown as text: these helpers make it safe for markdown
and HTML contexts. Streamlit already refuses raw HTML in markdown; markdown itself (links, images, headings) in a
label must still not render, so it is escaped too."""

from __future__ import annotations

import html
import re

import pandas as pd

_MARKDOWN_SPECIALS = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~$:])")
SNIPPET_CHARS = 220


def md(value: object) -> str:
    """Any value as literal text inside st.markdown / st.caption / widget labels."""
    text = "" if value is None or (not isinstance(value, str) and pd.isna(value)) else str(value)
    return _MARKDOWN_SPECIALS.sub(r"\\\1", text).replace("\n", " ")


def html_text(value: object, limit: int | None = None) -> str:
    """Literal text for an HTML context (graph node tooltips; node labels are drawn on a canvas as plain text)."""
    text = "" if value is None else str(value)
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return html.escape(text, quote=True)


def snippet(text: object, limit: int = SNIPPET_CHARS) -> str:
    """The start of a document on one line, for tables."""
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def feature_name(feature_id: int, label: object) -> str:
    """How a feature is named in pickers, tables and charts: "#12 chest pain, cough" (plain text, not markdown)."""
    return f"#{int(feature_id)} {own_label(feature_id, label)}".strip()


def own_label(feature_id: int, label: object) -> str:
    """A feature's label where its number is shown beside it: a label that ends with the feature's own number
    ("(no shared words) #12", kept unique that way) without it."""
    shown = "" if label is None or (not isinstance(label, str) and pd.isna(label)) else str(label)
    return shown.removesuffix(f" #{int(feature_id)}")


def sample_notice(shown: int, total: int) -> str:
    """What a sample is, in words: "Showing a random sample of 5,000 of 1,000,000 documents"."""
    return f"Showing a random sample of {shown:,} of {total:,} documents"
