"""Every relative link of the README and of docs/ leads somewhere: to a file of the repository and, for a `#anchor`, to
a heading of that file as GitHub names it; and every page of docs/ is linked from the README."""

import re
from collections.abc import Iterator
from pathlib import Path

from markdown_it import MarkdownIt
from markdown_it.token import Token

REPO = Path(__file__).resolve().parents[2]
PARSER = MarkdownIt("commonmark").enable("table")


def documentation() -> list[Path]:
    return [REPO / "README.md", REPO / "BENCHMARKS.md", *sorted((REPO / "docs").glob("*.md"))]


def inline_tokens(path: Path) -> Iterator[tuple[Token, Token | None]]:
    """Each inline token of the file, with the heading it belongs to (None when it is not a heading's)."""
    tokens = PARSER.parse(path.read_text(encoding="utf-8"))
    for before, token in zip([None, *tokens], tokens, strict=False):
        if token.type == "inline":
            yield token, before if before is not None and before.type == "heading_open" else None


def link_targets(path: Path) -> list[str]:
    """The targets of the file's links and images, as written (code spans and blocks hold none)."""
    targets = []
    for inline, _ in inline_tokens(path):
        for child in inline.children or []:
            if child.type == "link_open":
                targets.append(str(child.attrs["href"]))
            elif child.type == "image":
                targets.append(str(child.attrs["src"]))
    return targets


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces made hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of the file's headings; a repeated heading's get -1, -2, ... as on GitHub."""
    found: set[str] = set()
    for inline, heading in inline_tokens(path):
        if heading is None:
            continue
        base = slug("".join(child.content for child in inline.children or [] if child.type in {"text", "code_inline"}))
        anchor, repeat = base, 0
        while anchor in found:
            repeat += 1
            anchor = f"{base}-{repeat}"
        found.add(anchor)
    return found


def broken_links(path: Path) -> list[str]:
    """The relative links of `path` that name no file, or a heading its file does not have."""
    broken = []
    for target in link_targets(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not this repository's
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and anchor not in anchors(linked):
            broken.append(f"{target} (no such heading in {linked.name})")
    return broken


def test_every_relative_link_of_the_documentation_leads_to_a_file_and_heading():
    broken = {path.relative_to(REPO).as_posix(): broken_links(path) for path in documentation()}
    assert {path: links for path, links in broken.items() if links} == {}


def test_every_page_of_docs_is_linked_from_the_readme():
    linked = {(REPO / target.partition("#")[0]).resolve() for target in link_targets(REPO / "README.md")}
    assert sorted(path.name for path in (REPO / "docs").glob("*.md") if path.resolve() not in linked) == []


def test_a_missing_file_and_a_missing_heading_are_found(tmp_path):
    (tmp_path / "other.md").write_text("# Other page\n\n## What `export` writes\n\n## Notes\n\n## Notes\n")
    (tmp_path / "page.md").write_text(
        "# Page\n\nSee [that](other.md#what-export-writes), [notes](other.md#notes-1), [here](#page),\n"
        "[gone](missing.md), [nowhere](other.md#no-such-heading), [a](https://example.org/x.md#y) and\n"
        "`[not a link](missing.md)`.\n\n![picture](pictures/absent.png)\n"
    )
    assert broken_links(tmp_path / "page.md") == [
        "missing.md (no such file)",
        "other.md#no-such-heading (no such heading in other.md)",
        "pictures/absent.png (no such file)",
    ]


def test_anchors_are_named_as_github_names_them():
    assert slug("1. Embeddings, chunk-and-average") == "1-embeddings-chunk-and-average"
    assert slug("Workspaces on object storage (S3)") == "workspaces-on-object-storage-s3"
    assert slug("Labels: naming features, and how far to trust each name") == (
        "labels-naming-features-and-how-far-to-trust-each-name"
    )
