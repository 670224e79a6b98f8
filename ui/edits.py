"""*Your edits* on the Features page: rename, merge, split, hide and pin concepts, undo, and carry edits from an earlier
run of the dataset (see `prisma_core.curation.edits` and `prisma_core.carryover.carry`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd
import streamlit as st

from prisma_core.pipeline import EditRecord, LoadedRun, PrismaError, edits, load_run
from prisma_core.pipeline.edits import (
    EditNotice,
    carried_here,
    concept_name,
    dismiss_notice,
    edit_notices,
    reapply,
    sentence,
)
from prisma_core.pipeline.read_model import LEVEL_WORDS, level_names, level_word
from ui.state import bump_revision, revision, run_at, workspace, workspace_at
from ui.text import md

ACTIONS = {
    "rename": "Rename",
    "hide": "Hide",
    "pin": "Pin to the top",
    "merge": "Merge other themes into it",
    "split": "Split it into its sub-themes",
}
THEME_ONLY = ("merge", "split")
CARRIED_KEY = "carry_report"
PANEL_KEY = "edits_panel"
"""The panel's open state (a widget's: it survives reruns)."""
OPEN_KEY = "edits_panel_open"
"""Set when an edit was saved, undone or carried in the panel: it is open after the page reruns."""


def concept_options(run: LoadedRun, level: str) -> dict[int, str]:
    """The concepts of a level the run shows now: id -> "Theme 2: name"."""
    pairs = level_names(run, level).itertuples(index=False)
    return {int(i): f"{LEVEL_WORDS[level]} {int(i)}: {label}" for i, label in pairs}


def edits_panel(run: LoadedRun) -> None:
    """The whole panel, folded away under *Your edits* until the analyst opens it; it stays open while they edit
    (its open state is kept across reruns, and a change made in it opens it on the rerun that shows the change)."""
    records = workspace().edits.of(run.record.run_id)
    active = edits.active_edits(records)
    if st.session_state.pop(OPEN_KEY, False):
        st.session_state[PANEL_KEY] = True
    with st.expander(PANEL_TITLE, key=PANEL_KEY, on_change="rerun"):
        st.markdown(f"**{len(active)} edit{'' if len(active) == 1 else 's'} of this run**")
        st.caption(
            "Your names and changes are kept with this run, shown on every page, in the downloads and the report, "
            "and carried to the next training of this dataset where its concepts clearly match. Hidden concepts stay "
            "stored: undo the edit to show them again."
        )
        _edit_form(run)
        _edit_list(run, active)
        _carry_section(run)


PANEL_TITLE = "Your edits: rename, merge, split, hide or pin concepts"


def _changed(run: LoadedRun) -> None:
    """After an edit: every view reloads the run, and the panel opens again on the rerun."""
    bump_revision(run.record.run_id)
    st.session_state[OPEN_KEY] = True
    st.rerun()


def _edit_form(run: LoadedRun) -> None:
    columns = st.columns(3)
    level = columns[0].radio("Level", list(LEVEL_WORDS), format_func=LEVEL_WORDS.get, key="edit_level")
    options = concept_options(run, level)
    if not options:
        st.info(f"This run shows no {level_word(level)} to edit.")
        return
    target = columns[1].selectbox("Concept", list(options), format_func=options.__getitem__, key="edit_target")
    actions = [a for a in ACTIONS if (a not in THEME_ONLY or level == "theme") and (a != "hide" or level != "subtheme")]
    action = columns[2].radio("Change", actions, format_func=ACTIONS.get, key="edit_action")
    with st.form("edit_form", clear_on_submit=True):
        name = st.text_input("New name", key="edit_name") if action == "rename" else ""
        others = []
        if action == "merge":
            choices = [t for t in options if t != target]
            others = st.multiselect(
                "Themes merged into it", choices, format_func=options.__getitem__, key="edit_merged"
            )
        if st.form_submit_button("Save the change"):
            _save(run, action, level, int(target), name, others)


def _save(run: LoadedRun, action: str, level: str, target: int, name: str, others: list[int]) -> None:
    ws = workspace()
    try:
        if action == "rename":
            edits.rename(ws, run, level, target, name)
        elif action == "merge":
            edits.merge_themes(ws, run, target, others)
        elif action == "split":
            edits.split_theme(ws, run, target)
        else:
            (edits.hide if action == "hide" else edits.pin)(ws, run, level, target)
    except PrismaError as error:
        st.error(md(error))
        return
    _changed(run)


def _edit_list(run: LoadedRun, active: list[EditRecord]) -> None:
    if not active:
        return
    skipped = {edit.edit_id for edit in run.edited.not_applied}
    st.markdown("**Changes made**")
    for edit in reversed(active):
        row = st.columns([6, 1])
        note = " · *not shown: this concept was regrouped since*" if edit.edit_id in skipped else ""
        carried = " · carried from an earlier run" if edit.carried_from else ""
        row[0].markdown(
            f"{md(edits.describe(edit))} · {md(edit.author)}, {edit.created_at[:16].replace('T', ' ')}{carried}{note}"
        )
        label = "Show again" if edit.action == "hide" else "Undo"
        if row[1].button(label, key=f"undo_{edit.edit_id}"):
            edits.undo(workspace(), run.record.run_id, edit.edit_id)
            _changed(run)


def _carry_section(run: LoadedRun) -> None:
    others = [r for r in workspace().runs(run.record.dataset_id) if r.run_id != run.record.run_id]
    if not others:
        return
    st.markdown("**Edits of an earlier run**")
    ids = [r.run_id for r in reversed(others)]
    source = st.selectbox("Earlier run", ids, key="carry_from")
    if st.button("Carry its edits to this run", key="carry_button"):
        try:
            report = edits.carry_edits(workspace(), source, run.record.run_id)
        except PrismaError as error:
            st.error(md(error))
            return
        st.session_state[CARRIED_KEY] = report
        _changed(run)
    report = st.session_state.get(CARRIED_KEY)
    if report is not None and report.to_run == run.record.run_id and report.from_run == source:
        for line in report.summary():
            st.markdown(md(line))
        for edit, _ in report.not_carried:
            _by_hand(run, edit)
    _comparison(run, source)


def _by_hand(run: LoadedRun, edit: EditRecord) -> None:
    """An edit that found no clear match, with the choice of the concept to apply it to."""
    if edit.action == "merge":
        st.caption(f"{md(edits.describe(edit))}: merge the matching themes of this run by hand above.")
        return
    options = concept_options(run, edit.level)
    row = st.columns([4, 1])
    target = row[0].selectbox(
        f"Apply “{md(edits.describe(edit))}” to",
        list(options),
        format_func=options.__getitem__,
        key=f"by_hand_{edit.edit_id}",
    )
    if row[1].button("Apply", key=f"apply_{edit.edit_id}"):
        try:
            edits.apply_by_hand(workspace(), run, edit, int(target))
        except PrismaError as error:
            st.error(md(error))
            return
        _changed(run)


def _comparison(run: LoadedRun, source: str) -> None:
    """Kept, changed, new and gone concepts between the earlier run and this one."""
    if not st.toggle("Compare the two runs' concepts", key="compare_runs"):
        return
    ws = workspace()
    old_raw, new_raw = load_run(ws, source, with_edits=False), load_run(ws, run.record.run_id, with_edits=False)
    table = edits.compare_runs(load_run(ws, source, previous=old_raw), run, edits.match_runs(old_raw, new_raw))
    counts = edits.counts(table).rename(columns=str.capitalize)
    st.dataframe(counts.rename(index={"theme": "Themes", "family": "Families", "feature": "Features"}))
    st.caption(
        "Kept: clearly the same concept (themes and families sharing at least half their documents or features, "
        "features whose activations correlate at 0.7 or more). Changed: paired but less alike. New: only in this "
        "run. Gone: only in the earlier one."
    )
    st.dataframe(
        pd.DataFrame(table).rename(columns={"old_label": "Earlier name", "new_label": "Name now"}),
        hide_index=True,
        key="comparison_table",
    )


# -- edits that do not show, announced where the analyst looks ------------------------------------------------------


@st.cache_data(show_spinner="Checking your edits…", max_entries=4)
def _notices(workspace_path: str, run_id: str, revision: int) -> tuple[list[EditNotice], int]:
    run = run_at(workspace_path, run_id, revision)
    ws = workspace_at(workspace_path)
    return edit_notices(ws, run), carried_here(ws, run_id)


def edit_notices_view(run: LoadedRun, levels: Sequence[str] = edits.LEVELS, key: str = "notices") -> None:
    """Each edit of `levels` that this run does not show (its concept regrouped since, or an earlier run's edit a
    new training did not carry), with one click to make it again where it fits best, or to dismiss it; on Home
    (every level) also how many edits were carried from an earlier run."""
    run_id = run.record.run_id
    notices, carried = _notices(workspace().uri, run_id, revision(run_id))
    if carried and len(levels) == len(edits.LEVELS):
        st.caption(
            f"{carried} of your edits of an earlier run {'was' if carried == 1 else 'were'} carried to this run "
            "(see *Your edits* on the Features page)."
        )
    for notice in (n for n in notices if n.edit.level in levels):
        _notice(run, notice, key)


def _notice(run: LoadedRun, notice: EditNotice, key: str) -> None:
    edit_id = notice.edit.edit_id
    with st.container(border=True, key=f"{key}_notice_{edit_id}"):
        st.warning(md(sentence(notice, run)), icon=":material/warning:")
        left, middle, right = st.columns([3, 2, 1], vertical_alignment="bottom")
        targets: list[int] = list(notice.targets)
        if not targets and notice.edit.action != "merge":
            options = concept_options(run, notice.edit.level)
            if options:
                chosen = left.selectbox(
                    "Make it on", list(options), format_func=options.__getitem__, key=f"{key}_pick_{edit_id}"
                )
                targets = [int(chosen)]
        if targets:
            where = " + ".join(
                concept_name(run, "theme" if notice.edit.action == "merge" else notice.edit.level, t) for t in targets
            )
            if middle.button(f"Apply it to {where}", key=f"{key}_apply_{edit_id}", icon=":material/redo:"):
                _act(run, lambda: reapply(workspace(), run, notice, targets))
        elif notice.edit.action == "merge":
            left.caption("No themes of this run match the merged ones: merge them again in *Your edits*.")
        if right.button("Dismiss", key=f"{key}_dismiss_{edit_id}", help=DISMISS_HELP):
            _act(run, lambda: dismiss_notice(workspace(), run, notice))


DISMISS_HELP = (
    "Stop showing this notice. An edit of this run is undone (it no longer applied anyway); an edit of an earlier "
    "run stays on that run and is not carried here."
)


def _act(run: LoadedRun, action: Callable[[], object]) -> None:
    try:
        action()
    except PrismaError as error:
        st.error(md(error))
        return
    bump_revision(run.record.run_id)
    st.rerun()
