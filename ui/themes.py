"""The concept hierarchy as the analyst reads it, top-down: themes -> sub-themes -> families -> features.

Home and Features open on the themes table and how many documents fit no theme well; choosing a theme shows its
sub-themes, top documents, families and features. The number of themes and of sub-themes can be changed here (a
background job; no retraining).
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import streamlit as st

from prisma_core import pipeline
from prisma_core.pipeline import LoadedRun, NamedFamily, PrismaError, ProgressCallback
from prisma_core.pipeline.jobs import Job
from prisma_core.pipeline.read_model import (
    coverage_sentence,
    families_of_themes,
    family_counts,
    nested_subthemes,
    regroup_counts,
    shown_theme,
    subthemes_table,
    theme_documents,
    theme_families_table,
    theme_features,
    theme_name,
    themes_table,
    unfit_documents,
    unfit_documents_table,
)
from ui.edits import edit_notices_view
from ui.map import document_map_view
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
from ui.text import md, snippet

HIERARCHY_CAPTION = (
    "How to read it: a **theme** is a broad subject of the collection (like a section of a newspaper). Each theme "
    "splits into **sub-themes**, narrower subjects inside it (like the pages of that section). A theme also holds "
    "**families**: a general concept with the more specific concepts that appear with it. The smallest unit is a "
    "**feature**: one concept the model learned, named by a few keywords."
)
UNFIT_SHOWN = 200
"""Documents listed under "fit no theme well" (least clear first)."""
THEME_KEY = "theme_id"
"""The theme whose details are open; survives page switches (it is not a widget key)."""
TOP_TITLES = 3
TOP_DOCUMENTS = 10
ALL_THEMES = -2
N_THEMES_KEY = "n_themes"
N_THEMES_FROM_KEY = "n_themes_from"
"""(run id, number of themes) the number box was last filled from: the run's own number until the analyst types one."""
N_SUBTHEMES_KEY = "n_subthemes"


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


@st.cache_data(show_spinner=False, max_entries=8)
def _subthemes_table(workspace_path: str, run_id: str, revision: int, theme_id: int) -> pd.DataFrame:
    run = loaded_run(run_id)
    return subthemes_table(run, dataset_documents(run.record.dataset_id), TOP_TITLES, theme_id)


@st.cache_data(show_spinner=False, max_entries=8)
def _themes_table(workspace_path: str, run_id: str, revision: int) -> pd.DataFrame:
    run = loaded_run(run_id)
    return themes_table(run, dataset_documents(run.record.dataset_id), TOP_TITLES)


def current_theme(run: LoadedRun) -> int:
    """The open theme: the last one chosen, else the first shown (a pinned one, else the largest: theme 0)."""
    return shown_theme(run, st.session_state.get(THEME_KEY))


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
    n_subthemes = len(nested_subthemes(run))
    inside = f", split into {n_subthemes} sub-themes" if n_subthemes else ""
    st.caption(
        f"{len(table)} theme{'' if len(table) == 1 else 's'}{inside}; a document can belong to more than one theme, "
        "so the shares may add up to more than 100%."
    )
    unfit_documents_view(run, key)
    return picked


def unfit_documents_view(run: LoadedRun, key: str) -> None:
    """How many documents fit no theme well, and (in an expander) which, least clear first."""
    st.markdown(md(coverage_sentence(run)))
    positions = unfit_documents(run)
    if len(positions) == 0:
        return
    with st.expander(f"Documents that fit no theme well ({len(positions):,})"):
        st.caption(
            "Prisma does not force these into a theme: no theme clearly wins over the others (or none of the "
            "model's concepts is active in them). They may mix subjects, be very short, or be about something rare."
        )
        table = unfit_documents_table(run, dataset_documents(run.record.dataset_id), positions[:UNFIT_SHOWN])
        st.dataframe(
            pd.DataFrame(
                {
                    "document": table["doc_id"],
                    "document title": table["title"],
                    "start of the text": table["text"].map(snippet),
                    "closest theme": table["closest_theme"],
                    "closest theme's share": table["closest_share"],
                }
            ),
            hide_index=True,
            key=f"{key}_unfit_documents",
            column_config={
                "closest theme's share": st.column_config.NumberColumn(
                    format="percent", help="How much of the document the closest theme explains."
                )
            },
        )
        if len(positions) > UNFIT_SHOWN:
            st.caption(f"The {UNFIT_SHOWN} least clear of {len(positions):,} shown.")


def home_themes() -> None:
    """Home: the themes of the selected run and the map of its documents; a clicked theme opens on Features."""
    run = selected_run()
    if run is None:
        return
    edit_notices_view(run, key="home")
    if run.themes is None:
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
    grouped, counts = families_of_themes(run), family_counts(run)
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
    subthemes_view(run, theme_id, key)
    theme_documents_table(run, theme_id, int(info["n_documents"]), key)
    left, right = st.columns(2)
    with left:
        theme_families_view(run, theme_id, key)
    with right:
        theme_features_view(run, theme_id, key)


def subthemes_view(run: LoadedRun, theme_id: int, key: str) -> None:
    """The theme's sub-themes: name, size, strongest features and typical documents."""
    if run.subthemes is None:
        st.info("This run was grouped before Prisma found sub-themes: regroup the themes below to find them.")
        return
    table = _subthemes_table(workspace().uri, run.record.run_id, revision(run.record.run_id), theme_id)
    if table.empty:
        st.caption("This theme is not split into narrower subjects: its documents make one subject.")
        return
    st.markdown(f"**Sub-themes of this theme** ({len(table)}): the narrower subjects inside it")
    st.dataframe(
        table.drop(columns=["theme"]),
        hide_index=True,
        key=f"{key}_subthemes",
        column_config={
            "subtheme": st.column_config.NumberColumn("sub-theme", format="%d"),
            "label": st.column_config.TextColumn("sub-theme (keywords)", width="medium"),
            "documents": st.column_config.NumberColumn("documents", help="Documents in the sub-theme."),
            "share": st.column_config.NumberColumn("share", format="percent", help="Share of all documents."),
            "features": st.column_config.TextColumn("strongest features", width="medium"),
            "examples": st.column_config.TextColumn("example documents", width="large"),
        },
    )


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


def theme_families_view(run: LoadedRun, theme_id: int, key: str) -> None:
    table = theme_families_table(run, theme_id)
    st.markdown(f"**Families in this theme** ({len(table)})")
    st.dataframe(table, hide_index=True, key=f"{key}_theme_families")


def theme_features_view(run: LoadedRun, theme_id: int, key: str) -> None:
    """The theme's features, most typical first; a click opens one."""
    features = theme_features(run, theme_id)
    st.markdown(f"**Features in this theme** ({len(features)}, most typical first; click one to open it)")
    columns = {
        "feature_id": st.column_config.NumberColumn("feature", format="%d"),
        "density": st.column_config.NumberColumn("documents", help="Documents the feature is active on."),
    }
    table_key = f"{key}_theme_features"
    clickable_table(features, table_key, "feature_id", columns, f"{table_key}_pick", open_feature)


def regroup_form(run: LoadedRun) -> None:
    """Change the number of themes: regroups the run's features in the background (no retraining)."""
    run_id = run.record.run_id
    job_key = regroup_job_key(run_id)
    with st.expander("Change the number of themes or sub-themes", expanded=job_key in _active_jobs()):
        st.caption(
            "Fewer themes give broader subjects, more themes finer ones; the same for sub-themes inside them (leave "
            "sub-themes at 0 to let Prisma choose). Regrouping keeps every feature and family; it takes a little "
            "while (the themes are named again)."
        )
        job = job_panel(job_key, on_success=_regrouped)
        running = job is not None and job.running
        counts = regroup_counts(run)
        current = counts.current
        if st.session_state.get(N_THEMES_FROM_KEY) != (run_id, current):  # regrouped here or by another process
            st.session_state.pop(N_THEMES_KEY, None)
            st.session_state[N_THEMES_FROM_KEY] = (run_id, current)
        left, middle, right = st.columns([1, 1, 2], vertical_alignment="bottom")
        n_themes = left.number_input(
            "Number of themes", 2, counts.most_themes, current, key=N_THEMES_KEY, disabled=running
        )
        n_subthemes = middle.number_input(
            "Number of sub-themes",
            0,
            counts.most_subthemes,
            0,
            key=N_SUBTHEMES_KEY,
            disabled=running,
            help="0: chosen from the data. Every theme keeps at least one sub-theme.",
        )
        if right.button("Regroup", key="regroup", icon=":material/workspaces:", disabled=running):
            config = replace(
                run.settings.themes,
                n_themes=int(n_themes),
                n_subthemes=int(n_subthemes) if n_subthemes >= 2 else None,
            )
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
