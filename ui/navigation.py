"""The app's router: the page list, the sidebar (page links, dataset and run pickers) and the page run.

`app.py` calls `run()`. Every page starts with `route_here()`, for one case: Streamlit still has a legacy router for a
`pages/` folder, which serves the first request a server process receives, before any session has called
`st.navigation`. Asked for a page's URL (say /features), it runs `pages/features.py` on its own, without this router.
`route_here()` notices (the page is not being run by `run()`), runs the router instead, which registers the pages
(switching the legacy router off for good) and runs the asked-for page inside the app's frame. Page URLs are the file
names, so the legacy router always finds the page a natural URL names and never shows "Page not found".
The legacy router's own page list is hidden by `client.showSidebarNavigation = false` (.streamlit/config.toml); the
sidebar draws the app's page links itself.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

import streamlit as st

from prisma_core.pipeline import PrismaError, plain_reason
from ui.state import PAGES, sidebar, start_script_run
from ui.text import md

PAGE_TITLES = {
    "home": ("Home", ":material/home:"),
    "datasets": ("Datasets", ":material/upload_file:"),
    "embeddings": ("Embeddings", ":material/scatter_plot:"),
    "train": ("Train SAE", ":material/model_training:"),
    "features": ("Features", ":material/label:"),
    "families": ("Families", ":material/account_tree:"),
    "labels": ("Labels", ":material/sell:"),
    "explore": ("Explore", ":material/travel_explore:"),
    "glossary": ("Glossary", ":material/menu_book:"),
}
PAGE_ICON = "🌈"
"""The browser tab's icon: light split into colours. An emoji, which the browser draws itself; a Material icon
there is fetched from a Google font server, so an app without the internet showed none."""
_routing = threading.local()  # one script thread per session run


def pages() -> list[st.Page]:
    """Every page, its URL its file name (/features runs pages/features.py); Home at the root."""
    return [
        st.Page(PAGES[name], title=title, icon=icon, default=name == "home", url_path=None if name == "home" else name)
        for name, (title, icon) in PAGE_TITLES.items()
    ]


def url_aliases(name: str, title: str) -> list[str]:
    """Other addresses people type for a page: its name or its title as a slug ("train-sae", "train_sae"), in any of
    the usual capitalisations ("Features", "Train-SAE"); Streamlit matches an address exactly."""
    slugs = {name, re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")}
    slugs |= {slug.replace("-", "_") for slug in slugs}
    variants = {form for slug in slugs for form in (slug, slug.capitalize(), slug.title(), slug.upper())}
    variants |= {re.sub(r"[^A-Za-z0-9]+", sep, title) for sep in ("-", "_")}
    return sorted(variants - {name})  # the default page (Home) reserves its name too


def alias_pages(real: list[st.Page]) -> list[st.Page]:
    """Hidden pages at the aliases of every page, each sending the browser on to the page itself."""
    by_name = dict(zip(PAGE_TITLES, real, strict=True))
    return [
        st.Page(forward_to(page), title=page.title, url_path=alias)
        for name, page in by_name.items()
        for alias in url_aliases(name, page.title)
    ]


def forward_to(page: st.Page) -> Callable[[], None]:
    def forward() -> None:
        st.switch_page(page)

    return forward


def run() -> None:
    """Route this run: set up the page, draw the sidebar, run the chosen page."""
    st.set_page_config(page_title="Prisma", page_icon=PAGE_ICON, layout="wide")
    start_script_run()
    all_pages = pages()
    page = st.navigation(all_pages + alias_pages(all_pages), position="hidden")
    with st.sidebar:
        for link in all_pages:
            st.page_link(link, label=link.title, icon=link.icon)
        st.divider()
    _routing.active = True
    try:
        sidebar()
        page.run()
    except PrismaError as error:  # written for the analyst: the message is enough
        st.error(md(str(error)))
    except Exception as error:  # Streamlit's stop and rerun are BaseExceptions: they pass
        show_failure(error)
    finally:
        _routing.active = False


def show_failure(error: Exception) -> None:
    """An unexpected failure (a damaged table, storage gone mid-session) in plain words, details folded away."""
    reason = plain_reason(error)[:300]
    st.error(
        f"Prisma could not show this page: {md(reason)}. Whatever was saved before is kept. Reload the page to try "
        "again; if this happens again, the details below are for whoever looks after this Prisma installation."
    )
    with st.expander("Details"):
        st.exception(error)


def route_here() -> None:
    """First call of every page: when the legacy pages/ router ran this page directly, route through `run()`."""
    if not getattr(_routing, "active", False):
        run()
        st.stop()
