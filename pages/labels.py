"""Labels: name features and families with an Ollama model (local or hosted), and see how good the labels are."""

from __future__ import annotations

import streamlit as st

from prisma_core.pipeline import PrismaError, ProgressCallback, edits, labelling
from prisma_core.pipeline.jobs import Job
from prisma_core.pipeline.labelling import (
    LabelConfig,
    LabelPlan,
    LabelScope,
    LabelSummary,
    OllamaConfig,
    ScopeSummary,
    ScoreSummary,
    SetAside,
    StopCheck,
    counted,
    describe_plan,
    measured_pace,
)
from prisma_core.pipeline.read_model import theme_names
from ui.cards import feature_options
from ui.gates import require_run
from ui.loaders import label_score_baseline
from ui.navigation import route_here
from ui.ollama import connection_settings
from ui.progress import job_panel, start_job
from ui.state import PAGES, bump_revision, revision, workspace
from ui.text import md

COMMON_FEATURES = 20
"""Features the default batch names: the most common ones, a batch that takes minutes, not hours."""
SCOPES = {
    "common": "The {n_common} most common features",
    "all": "All features",
    "theme": "A theme",
    "family": "A family",
    "chosen": "Chosen features",
}
SCOPE_KEY = "label_scope"
RELABEL_KEY = "label_relabel"
SEEN_KEY = "label_jobs_seen"

route_here()


run = require_run()
run_id = run.record.run_id
ws = workspace()
st.title("Labels")
st.markdown(
    "Every feature starts with a keyword label. An LLM served by [Ollama](https://ollama.com), on this computer or "
    "hosted, can name features, families and themes in plain words: it reads each feature's strongest documents and "
    "documents where it is silent. Every label gets a score; pick the one to show on the feature's card."
)
label_job_key, score_job_key = f"label:{run_id}", f"score:{run_id}"


SINGULAR = {"features": "feature", "families": "family", "themes": "theme", "sub-themes": "sub-theme"}


def describe(summary: LabelSummary, what: str) -> str:
    parts = [f"{counted(summary.n_labelled, SINGULAR[what], what)} labelled by {md(summary.model)}"]
    if summary.n_skipped:
        parts.append(f"{summary.n_skipped:,} already had a label from this model")
    if summary.n_failed:
        parts.append(f"{summary.n_failed:,} failed (they keep their labels)")
    if summary.n_remaining:
        parts.append(f"{summary.n_remaining:,} not reached yet")
    if summary.n_inactive:
        parts.append(summary.not_asked(what))
    return ", ".join(parts) + "."


def show_outcome(job: Job) -> None:
    """What the last batch did, what stopped it, and what to do next."""
    result: ScopeSummary | None = job.result
    if result is None:
        return
    summaries = result.levels()
    lines = [describe(summary, what) for what, summary in summaries]
    stop = result.stop_reason
    errors = [error for _, summary in summaries for error in summary.errors]
    text = " ".join(lines) + (f" {md(stop)}" if stop else "")
    if stop or errors:
        st.warning(text, icon=":material/warning:")
    else:
        st.success(text, icon=":material/check_circle:")
    if errors:
        with st.expander(f"What failed ({len(errors)})"):
            for error in errors[:50]:
                st.markdown(f"- {md(error)}")
            st.caption(
                "A reply that is not valid JSON or gives no usable label was sent back with the reason before it "
                "counted as a failure. Try a larger model, raise the timeout, or run again to retry the failures."
            )
    set_aside_names([kept for _, summary in summaries for kept in summary.set_aside])
    left = sum(summary.n_remaining + summary.n_failed for _, summary in summaries)
    if left and st.session_state.get(RELABEL_KEY, False):
        st.info(
            f"{left:,} still to label. *Label again* is ticked, so **Start** asks about everything chosen again, "
            "what this batch labelled included: untick it to resume where the batch stopped."
        )
    elif left:
        st.info(f"{left:,} still to label: **Start** again resumes, skipping what is already labelled.")


def set_aside_names(kept: list[SetAside]) -> None:
    """Families, themes and sub-themes that kept their name because the model's scored worse; one click gives them
    the model's name instead (an edit, undone on the Features page's *Your edits*)."""
    if not kept:
        return
    with st.expander(f"{len(kept)} names kept because the model's scored worse"):
        for index, aside in enumerate(kept):
            left, right = st.columns([4, 1], vertical_alignment="center")
            left.markdown(md(aside.sentence()))
            if right.button("Use the model's name", key=f"use_name_{index}_{aside.kind}_{aside.group_id}"):
                try:
                    edits.rename(ws, run, aside.kind, aside.group_id, aside.label)
                except PrismaError as error:
                    st.error(md(error))
                    return
                bump_revision(run_id)
                st.rerun()


def set_aside_labels() -> None:
    """Features whose model label is not shown because it scores worse than their keywords: which, and why, with one
    click to show the model's label instead."""
    kept = run.features[run.features["set_aside"].notna() & ~run.features["hidden"]]
    if kept.empty:
        return
    with st.expander(f"{len(kept)} features keep their keywords: the model's label scored worse"):
        st.caption(
            "A label is shown when its score says it describes the feature at least as well as the other: the "
            "model's label replaces the keywords unless it scores clearly lower, or no better than chance."
        )
        for row in kept.itertuples():
            left, right = st.columns([4, 1], vertical_alignment="center")
            left.markdown(f"**#{row.feature_id}** {md(row.label_note)}")
            if right.button("Show the model's label", key=f"use_label_{row.feature_id}"):
                try:
                    ws.labels.prefer(run_id, int(row.feature_id), str(row.set_aside))
                except PrismaError as error:
                    st.error(md(error))
                    return
                bump_revision(run_id)
                st.rerun()


def refresh_once(job: Job | None) -> None:
    """Labels were stored by a finished job: reload the cached run once per job, in this session."""
    if job is None or job.running:
        return
    seen = st.session_state.setdefault(SEEN_KEY, set())
    if job.job_id not in seen:
        seen.add(job.job_id)
        bump_revision(run_id)


def scope_picker() -> tuple[LabelScope, str]:
    """What to label, and its name in the job's title."""
    active = run.features[run.features["density"] > 0]
    n_common = min(COMMON_FEATURES, len(active))
    scope = st.radio(
        "What to label",
        list(SCOPES),
        format_func=lambda key: SCOPES[key].format(n_common=n_common),
        horizontal=True,
        key=SCOPE_KEY,
    )
    if scope == "theme":
        if run.theme_info.empty:
            st.info("This run has no themes: train it again to group its features into themes.")
            st.stop()
        names = theme_names(run.theme_info, run.theme_info["theme_id"])
        order = [int(t) for t in run.theme_info["theme_id"]]
        theme_id = st.selectbox("Theme", order, format_func=names.__getitem__, key="label_theme")
        st.caption(
            "The theme (and each of its sub-themes) is named from the labels its features show now and the documents "
            "most about it."
        )
        return LabelScope([], [], [theme_id]), f"theme {theme_id}"
    if scope == "family":
        if not run.families:
            st.info("This run has no families: rebuild them on the Families page with a lower τ.")
            st.stop()
        names = {f.family_id: f"Family {f.family_id}: {f.label}" for f in run.families}
        family_id = st.selectbox("Family", list(names), format_func=names.__getitem__, key="label_family")
        family = next(f for f in run.families if f.family_id == family_id)
        st.caption(f"Its {len(family.members)} features are named first, then the family from their labels.")
        return LabelScope([int(m) for m in family.members], [family_id], []), f"family {family_id}"
    if scope == "chosen":
        options = feature_options(run)
        chosen = st.multiselect("Features", list(options), format_func=options.__getitem__, key="label_features")
        if not chosen:
            st.info("Choose one or more features.")
            st.stop()
        return LabelScope([int(f) for f in chosen], [], []), f"{len(chosen)} features"
    if scope == "common":
        common = active.sort_values(["density", "feature_id"], ascending=[False, True]).head(n_common)
        st.caption(
            f"A first batch: the {len(common)} features active on the most documents. Choose *All features* to name "
            "every one of them (then every family and theme)."
        )
        return LabelScope(common["feature_id"].astype(int).tolist(), [], []), f"the {len(common)} most common features"
    with_families = st.checkbox("Then name every family", value=True, key="label_with_families")
    with_themes = st.checkbox("Then name every theme and sub-theme", value=True, key="label_with_themes")
    return LabelScope(None, None if with_families else [], None if with_themes else []), "all features"


def plan_markdown(plan: LabelPlan, pace: float | None) -> str:
    text = describe_plan(plan, pace)
    if not text.requests:
        return f"{text.details} Tick *Label again* to redo."
    return f"**{text.requests}** {text.details}"


def seconds_per_request(job: Job | None) -> float | None:
    if job is None or job.result is None:
        return None
    return measured_pace(job.seconds, [summary for _, summary in job.result.levels()])


def _label_scope(
    config: OllamaConfig,
    label_config: LabelConfig,
    scope: LabelScope,
    progress: ProgressCallback,
    should_stop: StopCheck,
) -> ScopeSummary:
    with labelling.open_labeller(ws, run, config) as labeller:
        return labelling.label_scope(ws, run, labeller, label_config, scope, progress, should_stop)


def _check_labels(config: OllamaConfig, progress: ProgressCallback, should_stop: StopCheck) -> ScoreSummary:
    with labelling.ollama_labeller(config) as detector:
        return labelling.score_run(ws, run, detect_with=detector, progress=progress, should_stop=should_stop)


def start_labelling(config: OllamaConfig, label_config: LabelConfig, scope: LabelScope, title: str) -> None:
    start_job(
        label_job_key,
        f"Labelling {title} with {config.model}",
        lambda progress, should_stop: _label_scope(config, label_config, scope, progress, should_stop),
        stop_aware=True,
    )


def quality_section() -> None:
    st.subheader("How good are the labels")
    st.markdown(
        "The **label score** (0 to 1) says how well a label tells its feature's documents from the others: "
        "0.5 is chance, 1.0 perfect. A feature's card shows each score with the range it could take on another "
        "sample of as many documents, and says *not enough evidence* when the feature fires on too few documents."
    )
    quality = labelling.label_quality(ws, run_id)
    st.dataframe(
        quality,
        hide_index=True,
        key="label_quality",
        column_config={
            "source": "labels from",
            "n_labels": "labels",
            "n_scored": "scored",
            "mean_embedding": st.column_config.NumberColumn("mean score", format="%.3f"),
            "n_detected": "LLM-checked",
            "mean_detection": st.column_config.NumberColumn("mean LLM check", format="%.3f"),
        },
    )
    if st.button("Compare with chance (shuffled labels)", key="label_baseline"):
        st.session_state["label_baseline_shown"] = True
    if st.session_state.get("label_baseline_shown"):
        result = label_score_baseline(ws.uri, run_id, revision(run_id))
        if result.n_scored:
            st.markdown(
                f"The labels shown score **{result.mean_score:.3f}** on average over {result.n_scored:,} features; "
                f"the same labels shuffled across features score **{result.shuffled_mean:.3f}** (chance is 0.5). "
                f"{result.n_too_few:,} features fire on too few documents to score: not enough evidence."
            )
        else:
            st.info("No label has a score yet: features fire on too few documents.")


job = job_panel(label_job_key)
refresh_once(job)
if job is not None and not job.running:
    show_outcome(job)
running = job is not None and job.running

st.subheader("1. Ollama server")
config = connection_settings()
if config is not None:
    st.subheader("2. What to label")
    scope, scope_title = scope_picker()
    relabel = st.checkbox(
        "Label again what this model already labelled",
        key=RELABEL_KEY,
        help="Each model adds its own interpretation; labels from other models and your own are kept either way.",
    )
    label_config = LabelConfig(relabel=relabel)
    try:
        plan = labelling.plan_labels(
            ws, run, config, label_config, scope.feature_ids, scope.family_ids, scope.theme_ids
        )
    except PrismaError as error:
        st.error(md(error))
        st.stop()
    st.markdown(plan_markdown(plan, seconds_per_request(job)))
    resume = job is not None and job.status == "cancelled" and not relabel
    if st.button(
        "Resume" if resume else "Start",
        type="primary",
        icon=":material/play_arrow:",
        disabled=running or not plan.n_requests,
        key="label_start",
    ):
        start_labelling(config, label_config, scope, scope_title)

    with st.expander("Check the labels with the model (detection score)"):
        st.markdown(
            "The model sees only a label and a shuffled mix of 5 documents where its feature fires and 5 where it "
            "does not, and picks the matching ones: 1.0 all right, 0.5 chance. One request per LLM label."
        )
        score_job = job_panel(score_job_key)
        refresh_once(score_job)
        if score_job is not None and not score_job.running and isinstance(score_job.result, ScoreSummary):
            done = score_job.result
            st.caption(f"{done.n_detection:,} labels checked, {done.n_detection_failed:,} failed. {done.stop_reason}")
        if st.button(
            "Check LLM labels",
            key="label_detect",
            disabled=score_job is not None and score_job.running,
        ):
            start_job(
                score_job_key,
                f"Checking labels with {config.model}",
                lambda progress, should_stop: _check_labels(config, progress, should_stop),
                stop_aware=True,
            )

set_aside_labels()
quality_section()
st.page_link(PAGES["features"], label="See the labels on the feature cards", icon=":material/arrow_forward:")
