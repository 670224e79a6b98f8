"""A report page read as a browser would: its elements with their attributes, and its text as a reader sees it."""

from __future__ import annotations

from html.parser import HTMLParser


class Page(HTMLParser):
    """Every element of a page with its attributes, and its text as a reader sees it."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def named(self, tag: str) -> list[dict[str, str | None]]:
        return [attrs for name, attrs in self.tags if name == tag]

    def reads(self) -> str:
        return " ".join(" ".join(self.text).split())
