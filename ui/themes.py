"""The concept hierarchy as the analyst reads it, top-down: themes -> families -> features.

Home and Features open on the themes table; choosing a theme shows its top documents, its families and its
features. The number of themes can be changed here (a background job; no retraining).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from prisma_core import pipeline
from prisma_core.errors import PrismaError
from prisma_core.overview import families_of_themes, theme_documents, theme_families, themes_table
from prisma_core.pipeline import LoadedRun
from prisma_core.progress import ProgressCallback
from prisma_core.store import NamedFamily
from prisma_core.themes import MAX_THEMES, NO_THEME, ThemeConfig
from ui.jobs import Job
from ui.map import NO_THEME_NAME, document_map_view
from ui.progress import job_panel, start_job
from ui.state import (
    PAGES,
    RUN_KEY,
    dataset_documents,
    loaded_run,
    open_feature,
    revision,
    revision_bumper,
    workspace,
)
from ui.tables import clickable_table
from ui.text import feature_name, md, snippet

HIERARCHY_CAPTION = (
    "How to read it: a **theme** is a broad subject of the collection (like a section of a newspaper). A theme "
    "holds **families**: a general concept with the more specific concepts that appear with it. The smallest "
    "unit is a **feature**: one concept the model learned, named by a few keywords."
)
THEME_KEY = "theme_id"
"""The theme whose details are open; survives page switches (it is not a widget key)."""
TOP_TITLES = 3
TOP_DOCUMENTS = 10
ALL_THEMES = -2
N_THEMES_KEY = "n_themes"
N_THEMES_FROM_KEY = "n_themes_from"
"""(run id, number of themes) the number box was last filled from: the run's own number until the analyst types one."""


def regroup_job_key(run_id: str) -> str:
    return f"themes:{run_id}"


def selected_run() -> LoadedRun | None:
    """The run picked in the sidebar, or None when there is none (or it cannot be opened)."""
    run_id = st.session_state.get(RUN_KEY)
    if not run_id:
        return None
    try:
        return loaded_run(run_id)
    except PrismaError:
        return None


def theme_name(run: LoadedRun, theme_id: int) -> str:
    """How a theme is named in pickers and charts: "Theme 2: surgery · incision" (plain text, not markdown)."""
    if theme_id == NO_THEME:
        return NO_THEME_NAME
    return f"Theme {int(theme_id)}: {run.theme_info.set_index('theme_id').at[int(theme_id), 'label']}"


@st.cache_data(show_spinner=False, max_entries=8)
def _themes_table(workspace_path: str, run_id: str, revision: int) -> pd.DataFrame:
    run = loaded_run(run_id)
    return themes_table(run, dataset_documents(run.record.dataset_id), TOP_TITLES)


def current_theme(run: LoadedRun) -> int:
    """The open theme: the last one chosen, else the first shown (a pinned one, else the largest: theme 0)."""
    chosen, shown = st.session_state.get(THEME_KEY), run.theme_info["theme_id"].tolist()
    if chosen is not None and int(chosen) in shown:
        return int(chosen)
    return int(shown[0]) if shown else 0


def open_theme(theme_id: int) -> None:
    st.session_state[THEME_KEY] = int(theme_id)


def themes_overview(run: LoadedRun, key: str) -> int | None:
    """The themes table. A clicked row opens its theme (when it differs from the last click); returns the theme of
    the selected row, if any."""
    st.caption(HIERARCHY_CAPTION)
    if run.themes is None:
        st.info("This run was made before Prisma grouped features into themes: group them below.")
        return None
    table = _themes_table(workspace().uri, run.record.run_id, revision(run.record.run_id))
    number = st.column_config.NumberColumn
    picked = clickable_table(
        table,
        f"{key}_themes_table",
        "theme",
        {
            "theme": number("theme", format="%d"),
            "label": st.column_config.TextColumn("theme (keywords)", width="medium"),
            "documents": number("documents", help="Documents that belong to the theme."),
            "share": number("share", format="percent", help="Share of all documents."),
            "families": number("families", help="Families of concepts in the theme."),
            "features": number("features", help="Single concepts (features) in the theme."),
            "examples": st.column_config.TextColumn("example documents", width="large"),
        },
        f"{key}_themes_table_pick",
        open_theme,
    )
    st.caption(
        f"{len(table)} themes; a document can belong to more than one, so the shares may add up to more than 100%."
    )
    return picked


def home_themes() -> None:
    """Home: the themes of the selected run and the map of its documents; a clicked theme opens on Features."""
    run = selected_run()
    if run is None or run.themes is None:
        return
    st.subheader("What this collection is about")
    if (picked := themes_overview(run, key="home")) is not None:
        open_theme(picked)
        st.switch_page(PAGES["features"])
    st.caption("Click a theme to see its documents, families and features on the Features page.")
    document_map_view(run)


def families_by_theme(run: LoadedRun, families: list[NamedFamily]) -> list[NamedFamily]:
    """Families page: a theme picker (one theme at a time keeps the graph readable); returns its families."""
    if run.themes is None or not families:
        return families
    grouped = families_of_themes(run)
    counts = {t: len(grouped.get(t, [])) for t in run.theme_info["theme_id"]}
    options = [ALL_THEMES, *[t for t, n in counts.items() if n]]
    default = current_theme(run) if counts.get(current_theme(run)) else (options[1] if len(options) > 1 else ALL_THEMES)
    theme_id = st.selectbox(
        "Theme",
        options,
        index=options.index(default),
        format_func=lambda t: (
            f"All themes ({len(families)} families)"
            if t == ALL_THEMES
            else f"{theme_name(run, t)} ({counts[t]} families)"
        ),
        key="family_theme",
        help="Families are drawn one theme at a time; a family belongs to the theme of its general concept.",
    )
    return families if theme_id == ALL_THEMES else grouped.get(theme_id, [])


def theme_detail(run: LoadedRun, key: str) -> None:
    """A theme picker and the chosen theme's top documents, families and features (click a feature to open it)."""
    if run.themes is None or run.theme_info.empty:
        return
    pick_key = f"{key}_theme_pick"
    st.session_state[pick_key] = current_theme(run)
    theme_id = st.selectbox(
        "Theme",
        run.theme_info["theme_id"].tolist(),
        format_func=lambda t: theme_name(run, t),
        key=pick_key,
        on_change=lambda: open_theme(st.session_state[pick_key]),
    )
    info = run.theme_info.set_index("theme_id").loc[theme_id]
    st.subheader(md(theme_name(run, theme_id)))
    if isinstance(info["description"], str) and info["description"]:
        st.caption(md(info["description"]))
    theme_documents_table(run, theme_id, int(info["n_documents"]), key)
    left, right = st.columns(2)
    with left:
        theme_families_table(run, theme_id, key)
    with right:
        theme_features_table(run, list(info["features"]), key)


def theme_documents_table(run: LoadedRun, theme_id: int, n_documents: int, key: str) -> None:
    top = dataset_documents(run.record.dataset_id).beside(theme_documents(run, theme_id, TOP_DOCUMENTS))
    st.markdown(f"**Documents most about this theme** ({n_documents:,} belong to it)")
    st.dataframe(
        pd.DataFrame(
            {
                "doc_id": top["doc_id"],
                "title": top["title"],
                "text": top["text"].map(snippet),
                "certainty": top["share"],
            }
        ),
        hide_index=True,
        key=f"{key}_theme_documents",
        column_config={"certainty": st.column_config.NumberColumn(format="percent", help="How sure Prisma is.")},
    )


def theme_families_table(run: LoadedRun, theme_id: int, key: str) -> None:
    families = theme_families(run, theme_id)
    label_of = run.features.set_index("feature_id")["label"]
    st.markdown(f"**Families in this theme** ({len(families)})")
    st.dataframe(
        pd.DataFrame(
            {
                "family": [f.family_id for f in families],
                "label": [f.label for f in families],
                "features": [len(f.members) for f in families],
                "general concept": [feature_name(f.parent, label_of.get(f.parent)) for f in families],
            },
            columns=["family", "label", "features", "general concept"],
        ),
        hide_index=True,
        key=f"{key}_theme_families",
    )


def theme_features_table(run: LoadedRun, feature_ids: list[int], key: str) -> None:
    """The theme's features, most typical first; a click opens one."""
    features = run.features.set_index("feature_id").loc[feature_ids].reset_index()
    st.markdown(f"**Features in this theme** ({len(features)}, most typical first; click one to open it)")
    columns = {
        "feature_id": st.column_config.NumberColumn("feature", format="%d"),
        "density": st.column_config.NumberColumn("documents", help="Documents the feature is active on."),
    }
    table_key = f"{key}_theme_features"
    shown = features[["feature_id", "label", "density"]]
    clickable_table(shown, table_key, "feature_id", columns, f"{table_key}_pick", open_feature)


def regroup_form(run: LoadedRun) -> None:
    """Change the number of themes: regroups the run's features in the background (no retraining)."""
    run_id = run.record.run_id
    job_key = regroup_job_key(run_id)
    with st.expander("Change the number of themes", expanded=job_key in _active_jobs()):
        st.caption(
            "Fewer themes give broader subjects, more themes finer ones. Regrouping keeps every feature and family; "
            "it takes a little while (the themes are named again)."
        )
        job = job_panel(job_key, on_success=_regrouped)
        running = job is not None and job.running
        n_docs = run.codes.shape[0]
        current = run.themes.n_themes if run.themes is not None else min(8, n_docs)
        if st.session_state.get(N_THEMES_FROM_KEY) != (run_id, current):  # regrouped here or by another process
            st.session_state.pop(N_THEMES_KEY, None)
            st.session_state[N_THEMES_FROM_KEY] = (run_id, current)
        left, right = st.columns([1, 3], vertical_alignment="bottom")
        n_themes = left.number_input(
            "Number of themes", 2, max(2, min(MAX_THEMES, n_docs)), current, key=N_THEMES_KEY, disabled=running
        )
        if right.button("Regroup", key="regroup", icon=":material/workspaces:", disabled=running):
            stored = run.record.config.get("themes", {})
            config = ThemeConfig(n_themes=int(n_themes), member_share=stored.get("member_share", 0.3))
            ws, bump = workspace(), revision_bumper(run_id)
            _active_jobs().add(job_key)

            def regroup(progress: ProgressCallback) -> int:
                n_made = pipeline.rebuild_themes(ws, run_id, config, progress).n_themes
                bump()  # every session reloads the run, whichever page it is on
                return n_made

            start_job(job_key, f"Regrouping into {int(n_themes)} themes", regroup)


def _active_jobs() -> set[str]:
    return st.session_state.setdefault("theme_jobs", set())


def _regrouped(job: Job) -> None:
    _active_jobs().discard(job.key)
    st.session_state.pop(THEME_KEY, None)
    st.toast(f"Regrouped into {job.result} themes.")
