"""The code map (docs/code-map.md) names every module of the core and every page, so a newcomer finds each by name
there."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def code_map() -> str:
    return (REPO / "docs" / "code-map.md").read_text(encoding="utf-8")


def test_the_code_map_names_every_module_of_the_core() -> None:
    named = set(re.findall(r"`([\w/]+?)/?`", code_map()))
    modules = {
        path.stem if path.stem != "__init__" else path.parent.name
        for path in (REPO / "prisma_core").rglob("*.py")
        if path.stem != "__main__"
    }
    assert modules - {"prisma_core"} <= named, f"not in docs/code-map.md: {sorted(modules - named)}"


def test_the_code_map_names_every_page() -> None:
    pages = {path.stem.capitalize() for path in (REPO / "pages").glob("*.py")}
    missing = {page for page in pages if not re.search(rf"\b{page}\b", code_map())}
    assert not missing, f"pages not in docs/code-map.md: {sorted(missing)}"
