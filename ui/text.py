"""User content (document text, titles, labels) is always shown as text: these helpers make it safe for markdown
and HTML contexts. Streamlit already refuses raw HTML in markdown; markdown itself (links, images, headings) in a
label must still not render, so it is escaped too."""

from __future__ import annotations

import html
import re

import pandas as pd

from prisma_core.pipeline.read_model import feature_name as feature_name  # in the core: the report names features too
from prisma_core.pipeline.read_model import snippet as snippet

_MARKDOWN_SPECIALS = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~$:])")


def md(value: object) -> str:
    """Any value as literal text inside st.markdown / st.caption / widget labels."""
    text = "" if value is None or (not isinstance(value, str) and pd.isna(value)) else str(value)
    return _MARKDOWN_SPECIALS.sub(r"\\\1", text).replace("\n", " ")


def highlighted(pieces: list[tuple[str, bool]]) -> str:
    """Markdown of a text in pieces (`evidence.marked_pieces`), each marked piece on a highlighted background; the
    text's own markdown escaped and its line breaks kept."""
    lines: list[str] = [""]
    for piece, marked in pieces:
        for index, line in enumerate(piece.split("\n")):
            if index:
                lines.append("")
            escaped = md(line)
            lines[-1] += f":orange-background[{escaped}]" if marked and escaped.strip() else escaped
    return "  \n".join(lines)


def html_text(value: object, limit: int | None = None) -> str:
    """Literal text for an HTML context (graph node tooltips; node labels are drawn on a canvas as plain text)."""
    text = "" if value is None else str(value)
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return html.escape(text, quote=True)


def sample_notice(shown: int, total: int) -> str:
    """What a sample is, in words: "Showing a random sample of 5,000 of 1,000,000 documents"."""
    return f"Showing a random sample of {shown:,} of {total:,} documents"
