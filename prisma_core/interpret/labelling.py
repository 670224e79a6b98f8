"""Label a run's features, families and themes with Ollama, and score every label of a run.

Made for the app as much as for the command line: each stage reports progress, stops when `should_stop()` turns
true, and returns a summary with counts and the errors met. It raises only when nothing can be done at all
(Ollama unreachable, model unknown), before anything is written, so keyword labels and earlier LLM labels stay.

- Every feature label is stored, with its embedding score, as soon as it is made: a cancel or a crash loses at
  most the feature in flight. A rerun skips the features that already hold a label from the same model and prompt
  version, so an interrupted batch resumes where it stopped.
- A feature whose labelling fails (no usable answer after the retries, a timeout, a dropped connection) keeps its
  labels and is counted. After `max_consecutive_failures` failures in a row the batch stops: the server is gone or
  too slow, or the model cannot do the task, and carrying on would only wait out more timeouts.
- Family and theme labels are written every few groups and when the batch ends, however it ends (a hard kill
  loses at most the last few); a group whose labelling fails keeps its keyword label.
- Scores: see `label_scores` for the documents a label is scored on and `scoring` for the measures.
"""

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from prisma_core import analysis
from prisma_core.embed import EmbedConfig
from prisma_core.errors import LabellingError, NotFoundError, SettingsError
from prisma_core.interpret.keywords import KEYWORD_SOURCE
from prisma_core.interpret.label_scores import (
    ScoreConfig,
    ScoringDocuments,
    covering_keywords,
    label_embedding_scores,
    score_support,
    scoring_documents,
    shuffled_scores,
)
from prisma_core.interpret.ollama_labeller import LabelResult, OllamaConfig, OllamaLabeller, has_model
from prisma_core.interpret.prompts import CHARS_PER_TOKEN, PROMPT_VERSION
from prisma_core.interpret.scoring import detection_score
from prisma_core.lineage import record_stage
from prisma_core.progress import Progress, ProgressCallback, ignore_progress
from prisma_core.runs import LoadedRun, load_run, resolve_labels
from prisma_core.store import RunRecord, Workspace

StopCheck = Callable[[], bool]


def never_stop() -> bool:
    """Default `should_stop` for callers that do not cancel."""
    return False


@dataclass(frozen=True)
class LabelConfig:
    relabel: bool = False
    """Label again what this model and prompt version already labelled."""
    max_consecutive_failures: int = 3
    """Stop after this many failed features (or families) in a row."""
    max_family_children: int = 20
    """Child labels sent to label a family: its first (closest) children."""
    seed: int = 0
    """Seeds the contrast documents (with the feature id)."""

    def __post_init__(self) -> None:
        if self.max_consecutive_failures < 1:
            raise SettingsError(f"max_consecutive_failures must be >= 1, got {self.max_consecutive_failures}")
        if self.max_family_children < 0:
            raise SettingsError(f"max_family_children must be >= 0, got {self.max_family_children}")


@dataclass(frozen=True)
class LabelSummary:
    model: str
    host: str
    n_labelled: int
    n_skipped: int  # already labelled by this model and prompt version
    n_inactive: int  # selected features that fire on no document: nothing to label
    n_failed: int
    n_remaining: int  # never tried: the batch was cancelled or gave up
    errors: list[str] = field(default_factory=list)  # one per failure, naming the feature or family
    stop_reason: str = ""  # why the batch ended early; "" when it went through

    @property
    def first_error(self) -> str:
        return self.errors[0] if self.errors else ""


@dataclass(frozen=True)
class ScoreSummary:
    n_embedding: int  # labels given an embedding score now
    n_held_out: int  # ... of which on held-out documents
    n_in_sample: int  # ... of which on all activating documents (too few to hold any out)
    n_unscored: int  # labels of features active on too few documents: no score
    n_detection: int  # labels given a detection score now
    n_detection_failed: int
    errors: list[str] = field(default_factory=list)
    stop_reason: str = ""
    baseline: "ScoreBaseline | None" = None  # the shown labels against the same labels shuffled across features


@dataclass(frozen=True)
class ScoreBaseline:
    """The labels shown now, scored against themselves shuffled across features (what chance looks like here)."""

    n_scored: int  # features whose shown label has an embedding score
    mean_score: float  # mean embedding score of the shown labels
    shuffled_mean: float  # mean embedding score after shuffling those labels across the same features
    n_too_few: int  # active features on too few documents for a score: "not enough evidence"


class _Batch:
    """Progress, cancellation and the failure streak shared by the labelling and detection loops."""

    def __init__(
        self,
        stage: str,
        total: int,
        max_consecutive_failures: int,
        progress: ProgressCallback,
        should_stop: StopCheck,
    ):
        self.stage, self.total = stage, total
        self.max_consecutive_failures = max_consecutive_failures
        self.progress, self.should_stop = progress, should_stop
        self.n_done = self.n_failed = self.streak = 0
        self.errors: list[str] = []
        self.stop_reason = ""
        progress(Progress(stage, 0, total))

    @property
    def n_tried(self) -> int:
        return self.n_done + self.n_failed

    def keep_going(self) -> bool:
        if self.stop_reason:
            return False
        if self.should_stop():
            self.stop_reason = f"Cancelled after {self.n_tried} of {self.total}; everything done so far is kept."
        elif self.streak >= self.max_consecutive_failures:
            self.stop_reason = (
                f"Stopped after {self.streak} failures in a row; the last one: {self.errors[-1]} "
                "Everything done so far is kept: run again to resume."
            )
        return not self.stop_reason

    def succeeded(self, message: str) -> None:
        self.n_done += 1
        self.streak = 0
        self.progress(Progress(self.stage, self.n_tried, self.total, message))

    def failed(self, error: str) -> None:
        self.n_failed += 1
        self.streak += 1
        self.errors.append(error)
        self.progress(Progress(self.stage, self.n_tried, self.total, error))


# -- planning: what a batch will ask, before it starts ---------------------------------------------------------


@dataclass(frozen=True)
class LabelPlan:
    n_features: int  # features the batch will ask the model about
    n_features_skipped: int  # already labelled by this model and prompt version (resume skips them)
    n_inactive: int  # selected features that never fire: nothing to label
    n_families: int  # families the batch will ask about
    n_families_skipped: int
    prompt_tokens: int  # estimated tokens the model will read, all requests together
    n_themes: int = 0  # themes the batch will ask about
    n_themes_skipped: int = 0

    @property
    def n_requests(self) -> int:
        return self.n_features + self.n_families + self.n_themes


def plan_labels(
    workspace: Workspace,
    run: LoadedRun,
    ollama: OllamaConfig,
    config: LabelConfig = LabelConfig(),
    feature_ids: Sequence[int] | None = None,
    family_ids: Sequence[int] | None = (),
    theme_ids: Sequence[int] | None = (),
) -> LabelPlan:
    """What `label_run` (on `feature_ids`, all by default), `label_families` (on `family_ids`) and `label_themes`
    (on `theme_ids`; for both, none by default and all with None) would ask, from what is stored now. Sends
    nothing to Ollama."""
    record = run.record
    selected = _selected_features(len(run.features), feature_ids)
    wanted = [f for f in selected if run.features["density"].iat[f] > 0]
    done = set() if config.relabel else _labelled_by(workspace.interpretations(record.run_id), ollama.model)
    todo = [f for f in wanted if f not in done]
    families = _chosen(workspace.families(record.run_id), "family_id", family_ids)
    family_todo = [f for f in families if config.relabel or not has_model([f["label_source"]], ollama.model)]
    themes = _chosen(workspace.themes(record.run_id), "theme_id", theme_ids)
    theme_todo = [t for t in themes if config.relabel or not has_model([t["label_source"]], ollama.model)]
    sample = workspace.documents(record.dataset_id, ["text"])["text"].head(200)
    mean_tokens = int(sample.str.len().mean() / CHARS_PER_TOKEN) if len(sample) else 0
    document_tokens = min(ollama.max_doc_tokens, mean_tokens)
    per_request = PROMPT_OVERHEAD_TOKENS + (ollama.n_evidence + ollama.n_contrast) * document_tokens
    return LabelPlan(
        n_features=len(todo),
        n_features_skipped=len(wanted) - len(todo),
        n_inactive=len(selected) - len(wanted),
        n_families=len(family_todo),
        n_families_skipped=len(families) - len(family_todo),
        prompt_tokens=per_request * (len(todo) + len(family_todo) + len(theme_todo)),
        n_themes=len(theme_todo),
        n_themes_skipped=len(themes) - len(theme_todo),
    )


def _chosen(groups: list[dict[str, Any]], id_key: str, ids: Sequence[int] | None) -> list[dict[str, Any]]:
    """The groups named in `ids` (all of them with None)."""
    if ids is None:
        return groups
    wanted = {int(i) for i in ids}
    return [g for g in groups if int(g[id_key]) in wanted]


PROMPT_OVERHEAD_TOKENS = 300
"""Instructions, tags and (for a family) member labels around the documents of one request."""


# -- feature labels ---------------------------------------------------------------------------------------------


def label_run(
    workspace: Workspace,
    run_id: str | None,
    ollama: OllamaConfig,
    config: LabelConfig = LabelConfig(),
    feature_ids: Sequence[int] | None = None,
    progress: ProgressCallback = ignore_progress,
    should_stop: StopCheck = never_stop,
) -> LabelSummary:
    """Label every active feature of the run (the newest by default), or the active ones among `feature_ids`.

    Evidence: the feature's `ollama.n_evidence` top-activating documents; contrast: `ollama.n_contrast` random
    documents where it is zero. Raises LabellingError before writing anything if Ollama or the model is missing.
    """
    run = load_run(workspace, run_id)
    record = run.record
    selected = _selected_features(len(run.features), feature_ids)
    wanted = [feature for feature in selected if run.features["density"].iat[feature] > 0]
    done = set() if config.relabel else _labelled_by(workspace.interpretations(record.run_id), ollama.model)
    todo = [feature for feature in wanted if feature not in done]
    with OllamaLabeller(ollama) as labeller:
        if todo:
            labeller.check()
        batch = _Batch("label", len(todo), config.max_consecutive_failures, progress, should_stop)
        if todo:
            _label_features(workspace, run, todo, labeller, config, batch)
    summary = LabelSummary(
        model=ollama.model,
        host=ollama.host,
        n_labelled=batch.n_done,
        n_skipped=len(wanted) - len(todo),
        n_inactive=len(selected) - len(wanted),
        n_failed=batch.n_failed,
        n_remaining=len(todo) - batch.n_tried,
        errors=batch.errors,
        stop_reason=batch.stop_reason,
    )
    if todo:
        _record_batch(workspace, record, "feature", ollama, config, summary)
    return summary


def _label_features(
    workspace: Workspace,
    run: LoadedRun,
    todo: list[int],
    labeller: OllamaLabeller,
    config: LabelConfig,
    batch: _Batch,
) -> None:
    record = run.record
    texts = workspace.documents(record.dataset_id, ["position", "text"])["text"].to_numpy()
    vectors = workspace.vectors(record.dataset_id, record.embedding_key)
    score_config = covering_keywords(ScoreConfig(), max(_keyword_top_documents(record), labeller.config.n_evidence))
    codes = sp.csc_matrix(run.codes)
    for feature in todo:
        if not batch.keep_going():
            return
        evidence = analysis.top_documents(codes, feature, labeller.config.n_evidence)["position"].to_numpy()
        contrast = analysis.zero_documents(codes, feature, labeller.config.n_contrast, seed=config.seed + feature)
        try:
            result = labeller.label_feature(list(texts[evidence]), list(texts[contrast]))
        except LabellingError as error:
            batch.failed(f"Feature {feature}: {error}")
            continue
        scores = label_embedding_scores(
            [feature], [result.label], codes, vectors, _embed_config(record), score_config
        ).scores
        row = {
            "feature_id": feature,
            "label": result.label,
            "description": result.description,
            "source": result.model,
            "prompt_version": result.prompt_version,
            "score_embedding": float(scores[0]),
        }
        workspace.add_interpretations(record.run_id, [row])
        batch.succeeded(f"feature {feature}: {result.label}")


def _record_batch(
    workspace: Workspace, record: RunRecord, kind: str, ollama: OllamaConfig, config: LabelConfig, summary: LabelSummary
) -> None:
    """The labelling batch's stage record, once its labels are stored (the server's secrets are left out)."""
    server = {setting.name: getattr(ollama, setting.name) for setting in fields(ollama) if setting.repr}
    settings = {"kind": kind, "ollama": server, "labels": asdict(config)}
    record_stage(workspace, "labelling", record.run_id, record.dataset_id, settings, asdict(summary), record.run_id)


def _selected_features(n_features: int, feature_ids: Sequence[int] | None) -> list[int]:
    """The requested feature ids (all by default), sorted, each checked to exist."""
    if feature_ids is None:
        return list(range(n_features))
    selected = sorted({int(feature) for feature in feature_ids})
    unknown = [feature for feature in selected if not 0 <= feature < n_features]
    if unknown:
        raise NotFoundError(
            f"This run has features 0 to {n_features - 1}; there is no feature {', '.join(map(str, unknown))}."
        )
    return selected


def _labelled_by(interpretations: pd.DataFrame, model: str) -> set[int]:
    """Features holding a label from this model (a missing tag meaning ':latest') and the current prompts."""
    same = interpretations["source"].map(lambda source: has_model([source], model))
    current = interpretations["prompt_version"] == PROMPT_VERSION
    return set(interpretations.loc[same & current, "feature_id"].astype(int))


def _embed_config(record: RunRecord) -> EmbedConfig:
    return EmbedConfig(**record.config["embed"])


def _keyword_top_documents(record: RunRecord) -> int:
    return int(record.config.get("keywords", {}).get("n_top_documents", 0))


# -- group labels: families now, themes through the same path ------------------------------------------------


@dataclass(frozen=True)
class FeatureGroup:
    """Features named together: a family (its parent first), or a theme (its broadest member first)."""

    kind: str  # a key of prompts.GROUP_KINDS ("family", "theme"), named in the prompt
    name: str  # how progress and errors name it, e.g. "Family 3"
    members: list[int]  # feature ids, the most general first


def group_documents(
    codes: sp.csc_matrix, members: Sequence[int], n_evidence: int, n_contrast: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(evidence, contrast) document positions of a group: where its members' summed activation is highest, and
    a seeded random sample of documents where none of them fires. codes: [n_docs, n_features]."""
    summed = np.asarray(codes[:, list(members)].sum(axis=1)).ravel()
    active = np.flatnonzero(summed > 0)
    evidence = active[np.lexsort((active, -summed[active]))][:n_evidence]
    inactive = np.flatnonzero(summed == 0)
    rng = np.random.default_rng([seed, *members[:1]])
    contrast = rng.choice(inactive, size=min(n_contrast, len(inactive)), replace=False)
    return evidence, contrast


def label_group(
    group: FeatureGroup,
    shown: pd.Series,
    texts: np.ndarray,
    codes: sp.csc_matrix,
    labeller: OllamaLabeller,
    config: LabelConfig,
) -> LabelResult:
    """Name a group from the labels its members show now (`shown`: feature id -> label) and its documents.

    Raises LabellingError when the model gives no usable answer; nothing is stored here."""
    evidence, contrast = group_documents(
        codes, group.members, labeller.config.n_evidence, labeller.config.n_contrast, config.seed
    )
    member_labels = [shown[member] for member in group.members[1:]][: config.max_family_children]
    return labeller.label_group(
        group.kind, shown[group.members[0]], member_labels, list(texts[evidence]), list(texts[contrast])
    )


def label_families(
    workspace: Workspace,
    run_id: str | None,
    ollama: OllamaConfig,
    config: LabelConfig = LabelConfig(),
    progress: ProgressCallback = ignore_progress,
    should_stop: StopCheck = never_stop,
    family_ids: Sequence[int] | None = None,
) -> LabelSummary:
    """Name each family of the run (or those in `family_ids`) from the labels its parent and children show now
    (preferred, LLM, keywords) and the documents where the family is strongest (see `_label_groups`)."""
    return _label_groups(workspace, run_id, ollama, config, progress, should_stop, _FAMILIES, family_ids)


def label_themes(
    workspace: Workspace,
    run_id: str | None,
    ollama: OllamaConfig,
    config: LabelConfig = LabelConfig(),
    progress: ProgressCallback = ignore_progress,
    should_stop: StopCheck = never_stop,
    theme_ids: Sequence[int] | None = None,
) -> LabelSummary:
    """Name each theme of the run (or those in `theme_ids`) from the labels of its most typical features and the
    documents where those features are strongest (see `_label_groups`)."""
    return _label_groups(workspace, run_id, ollama, config, progress, should_stop, _THEMES, theme_ids)


@dataclass(frozen=True)
class _GroupTable:
    """Where one kind of group is stored: how to read and replace its rows, and which fields hold what."""

    kind: str  # a key of prompts.GROUP_KINDS
    stage: str  # the progress stage name
    id_key: str
    members_key: str
    read: Callable[[Workspace, str], list[dict[str, Any]]]
    save: Callable[[Workspace, str, list[dict[str, Any]]], None]


_FAMILIES = _GroupTable("family", "family labels", "family_id", "members", Workspace.families, Workspace.save_families)
_THEMES = _GroupTable("theme", "theme labels", "theme_id", "features", Workspace.themes, Workspace.save_themes)


def _label_groups(
    workspace: Workspace,
    run_id: str | None,
    ollama: OllamaConfig,
    config: LabelConfig,
    progress: ProgressCallback,
    should_stop: StopCheck,
    table: _GroupTable,
    group_ids: Sequence[int] | None,
) -> LabelSummary:
    """Groups already named by this model are skipped unless `config.relabel`; a group that fails keeps its label.
    Labels are saved every few groups and when the batch ends, onto the groups stored at that moment: a group
    rebuilt in the meantime (other members) keeps its new label."""
    run = load_run(workspace, run_id)
    record = run.record
    groups = table.read(workspace, record.run_id)
    wanted = _chosen(groups, table.id_key, group_ids)
    todo = [g for g in wanted if config.relabel or not has_model([g["label_source"]], ollama.model)]
    shown = resolve_labels(workspace.interpretations(record.run_id)).set_index("feature_id")["label"]
    made: dict[int, LabelResult] = {}
    with OllamaLabeller(ollama) as labeller:
        if todo:
            labeller.check()
        batch = _Batch(table.stage, len(todo), config.max_consecutive_failures, progress, should_stop)
        texts = workspace.documents(record.dataset_id, ["position", "text"])["text"].to_numpy() if todo else None
        codes = sp.csc_matrix(run.codes)
        try:
            for row in todo:
                if not batch.keep_going():
                    break
                group_id = int(row[table.id_key])
                name = f"{table.kind.capitalize()} {group_id}"
                group = FeatureGroup(table.kind, name, [int(m) for m in row[table.members_key]])
                try:
                    result = label_group(group, shown, texts, codes, labeller, config)
                except LabellingError as error:
                    batch.failed(f"{group.name}: {error}")
                    continue
                made[group_id] = result
                batch.succeeded(f"{table.kind} {group_id}: {result.label}")
                if len(made) % GROUP_SAVE_EVERY == 0:
                    _save_group_labels(workspace, record.run_id, table, groups, made)
        finally:
            if made:
                _save_group_labels(workspace, record.run_id, table, groups, made)
    summary = LabelSummary(
        model=ollama.model,
        host=ollama.host,
        n_labelled=batch.n_done,
        n_skipped=len(wanted) - len(todo),
        n_inactive=0,
        n_failed=batch.n_failed,
        n_remaining=len(todo) - batch.n_tried,
        errors=batch.errors,
        stop_reason=batch.stop_reason,
    )
    if todo:
        _record_batch(workspace, record, table.kind, ollama, config, summary)
    return summary


GROUP_SAVE_EVERY = 10
"""Group labels are written after this many new ones (and at the end): a crash loses at most these."""


def _save_group_labels(
    workspace: Workspace,
    run_id: str,
    table: _GroupTable,
    labelled_from: list[dict[str, Any]],
    made: dict[int, LabelResult],
) -> None:
    """Write the labels made onto the groups stored now, matched by id and members (a rebuild is respected)."""
    members_of = {int(g[table.id_key]): list(g[table.members_key]) for g in labelled_from}
    updated, changed = [], False
    for group in table.read(workspace, run_id):
        group_id = int(group[table.id_key])
        result = made.get(group_id)
        if result is not None and list(group[table.members_key]) == members_of.get(group_id):
            changed |= (group["label"], group["label_source"]) != (result.label, result.model)
            group = group | {"label": result.label, "label_source": result.model}
        updated.append(group)
    if changed:
        table.save(workspace, run_id, updated)


# -- scores -----------------------------------------------------------------------------------------------------


def score_run(
    workspace: Workspace,
    run_id: str | None = None,
    config: ScoreConfig = ScoreConfig(),
    detect_with: OllamaConfig | None = None,
    feature_ids: Sequence[int] | None = None,
    progress: ProgressCallback = ignore_progress,
    should_stop: StopCheck = never_stop,
) -> ScoreSummary:
    """Give every label of the run that lacks one an embedding score and, with `detect_with`, a detection score.

    Detection asks the LLM, once per label, which of a shuffled mix of activating and non-activating documents
    express the label; it covers LLM labels, and keyword labels too when `config.detect_keyword_labels`.
    Raises LabellingError before any detection if Ollama or the model is missing (embedding scores are kept).
    """
    run = load_run(workspace, run_id)
    record = run.record
    config = covering_keywords(config, _keyword_top_documents(record))
    interpretations = workspace.interpretations(record.run_id)
    if feature_ids is not None:
        interpretations = interpretations[interpretations["feature_id"].isin({int(f) for f in feature_ids})]
    codes = sp.csc_matrix(run.codes)
    counts = _store_embedding_scores(workspace, record, codes, interpretations, config, progress)
    detection = None
    if detect_with is not None:
        detection = _store_detection_scores(
            workspace, record, codes, interpretations, config, detect_with, progress, should_stop
        )
    return ScoreSummary(
        baseline=score_baseline(workspace, record.run_id, config),
        n_embedding=counts["held_out"] + counts["in_sample"],
        n_held_out=counts["held_out"],
        n_in_sample=counts["in_sample"],
        n_unscored=counts["too_few"],
        n_detection=detection.n_done if detection else 0,
        n_detection_failed=detection.n_failed if detection else 0,
        errors=detection.errors if detection else [],
        stop_reason=detection.stop_reason if detection else "",
    )


def _store_embedding_scores(
    workspace: Workspace,
    record: RunRecord,
    codes: sp.csc_matrix,
    interpretations: pd.DataFrame,
    config: ScoreConfig,
    progress: ProgressCallback,
) -> dict[str, int]:
    """Score the labels lacking an embedding score in one batch; returns how many got each basis."""
    missing = interpretations[interpretations["score_embedding"].isna()]
    progress(Progress("embedding scores", 0, len(missing)))
    if missing.empty:
        return {"held_out": 0, "in_sample": 0, "too_few": 0}
    vectors = workspace.vectors(record.dataset_id, record.embedding_key)
    result = label_embedding_scores(
        missing["feature_id"].tolist(), missing["label"].tolist(), codes, vectors, _embed_config(record), config
    )
    scored = {
        interpretation_id: {"score_embedding": float(score)}
        for interpretation_id, score in zip(missing["interpretation_id"], result.scores, strict=True)
        if np.isfinite(score)
    }
    workspace.set_interpretation_scores(record.run_id, scored)
    progress(Progress("embedding scores", len(missing), len(missing)))
    return {basis: result.basis.count(basis) for basis in ("held_out", "in_sample", "too_few")}


def _store_detection_scores(
    workspace: Workspace,
    record: RunRecord,
    codes: sp.csc_matrix,
    interpretations: pd.DataFrame,
    config: ScoreConfig,
    detect_with: OllamaConfig,
    progress: ProgressCallback,
    should_stop: StopCheck,
) -> _Batch:
    candidates = interpretations[interpretations["score_detection"].isna()]
    if not config.detect_keyword_labels:
        candidates = candidates[candidates["source"] != KEYWORD_SOURCE]
    documents = {feature: scoring_documents(codes, feature, config) for feature in set(candidates["feature_id"])}
    candidates = candidates[[documents[feature].basis != "too_few" for feature in candidates["feature_id"]]]
    batch = _Batch("detection", len(candidates), config.max_consecutive_failures, progress, should_stop)
    if candidates.empty:
        return batch
    texts = workspace.documents(record.dataset_id, ["position", "text"])["text"].to_numpy()
    with OllamaLabeller(detect_with) as detector:
        detector.check()
        for row in candidates.itertuples():
            if not batch.keep_going():
                break
            try:
                score = _detection(detector, row.label, documents[row.feature_id], texts, config, row.feature_id)
            except LabellingError as error:
                batch.failed(f"Feature {row.feature_id} ({row.label}): {error}")
                continue
            workspace.set_interpretation_scores(record.run_id, {row.interpretation_id: {"score_detection": score}})
            batch.succeeded(f"feature {row.feature_id}: {row.label} {score:.2f}")
    return batch


def _detection(
    detector: OllamaLabeller,
    label: str,
    documents: ScoringDocuments,
    texts: np.ndarray,
    config: ScoreConfig,
    feature: int,
) -> float:
    positives = list(texts[documents.positives[: config.n_detect_positives]])
    negatives = list(texts[documents.negatives[: config.n_detect_negatives]])
    return detection_score(detector, label, positives, negatives, seed=config.seed + feature)


def score_baseline(
    workspace: Workspace, run_id: str | None = None, config: ScoreConfig = ScoreConfig()
) -> ScoreBaseline:
    """Mean embedding score of the label each active feature shows, and of the same labels shuffled across the
    features (seeded by `config.seed`): the distance between the two is what the labels are worth."""
    run = load_run(workspace, run_id)
    record = run.record
    config = covering_keywords(config, _keyword_top_documents(record))
    active = run.features[run.features["density"] > 0]
    labelled = active[active["label"].notna()]
    support = score_support(labelled["n_strong"].to_numpy(), run.codes.shape[0], config)
    scoreable = labelled[[basis != "too_few" for basis in support.basis]]
    if scoreable.empty:
        return ScoreBaseline(0, float("nan"), float("nan"), len(labelled))
    vectors = workspace.vectors(record.dataset_id, record.embedding_key)
    shuffled = shuffled_scores(
        scoreable["feature_id"].tolist(),
        scoreable["label"].tolist(),
        run.codes,
        vectors,
        _embed_config(record),
        config,
        seed=config.seed,
    )
    scores = scoreable["score_embedding"].astype(float)
    return ScoreBaseline(
        n_scored=int(scores.notna().sum()),
        mean_score=float(scores.mean()) if scores.notna().any() else float("nan"),
        shuffled_mean=float(np.nanmean(shuffled.scores)) if np.isfinite(shuffled.scores).any() else float("nan"),
        n_too_few=len(labelled) - len(scoreable),
    )


def label_quality(workspace: Workspace, run_id: str | None = None) -> pd.DataFrame:
    """Per label source (keywords, each model): n_labels, n_scored, mean_embedding, n_detected, mean_detection."""
    record = workspace.run_or_latest(run_id)
    interpretations = workspace.interpretations(record.run_id)
    grouped = interpretations.groupby("source")
    return pd.DataFrame(
        {
            "n_labels": grouped.size(),
            "n_scored": grouped["score_embedding"].count(),
            "mean_embedding": grouped["score_embedding"].mean(),
            "n_detected": grouped["score_detection"].count(),
            "mean_detection": grouped["score_detection"].mean(),
        }
    ).reset_index()
