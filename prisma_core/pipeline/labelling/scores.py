"""Label scores: store embedding and detection scores for a run's labels, the shuffled baseline, and per-source quality.

See `label_scores` for the documents a label is scored on and `scoring` for the measures.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import scipy.sparse as sp

from prisma_core.errors import LabellingError
from prisma_core.interpret.keywords import KEYWORD_SOURCE
from prisma_core.interpret.label_scores import (
    ScoreConfig,
    ScoringDocuments,
    covering_keywords,
    label_embedding_scores,
    score_support,
    scoring_documents,
    shuffled_labels,
)
from prisma_core.interpret.scoring import Detector, detection_score
from prisma_core.pipeline.labelling.job import (
    Batch,
    Pending,
    StopCheck,
    never_stop,
)
from prisma_core.progress import Progress, ProgressCallback, ignore_progress
from prisma_core.reading.runs import LoadedRun, with_shown_labels
from prisma_core.store import RunRecord, Workspace


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


def score_run(
    workspace: Workspace,
    run: LoadedRun,
    config: ScoreConfig = ScoreConfig(),
    detect_with: Detector | None = None,
    feature_ids: Sequence[int] | None = None,
    progress: ProgressCallback = ignore_progress,
    should_stop: StopCheck = never_stop,
) -> ScoreSummary:
    """Give every label of the run that lacks one an embedding score and, with `detect_with`, a detection score.

    Detection asks the LLM, once per label, which of a shuffled mix of activating and non-activating documents
    express the label; it covers LLM labels, and keyword labels too when `config.detect_keyword_labels`.
    Raises LabellingError before any detection if the detector cannot answer (Ollama or the model missing: its
    `check`; embedding scores are kept). The caller owns the detector (and closes its connection).
    `run`: the run as the caller loaded it (its codes are used, never read again).
    """
    record = run.record
    config = covering_keywords(config, run.settings.keywords.n_top_documents)
    interpretations = workspace.labels.of(record.run_id)
    if feature_ids is not None:
        interpretations = interpretations[interpretations["feature_id"].isin({int(f) for f in feature_ids})]
    codes = sp.csc_matrix(run.codes)
    counts = _store_embedding_scores(workspace, run, codes, interpretations, config, progress)
    detection = None
    if detect_with is not None:
        detection = _store_detection_scores(
            workspace, record, codes, interpretations, config, detect_with, progress, should_stop
        )
        workspace.compact(["interpretations"])  # detection scores are written a few at a time
    return ScoreSummary(
        baseline=score_baseline(workspace, run, config),
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
    run: LoadedRun,
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
    record = run.record
    vectors = workspace.stored_vectors(record.dataset_id, record.embedding_key)  # only the scored rows are read
    result = label_embedding_scores(
        missing["feature_id"].tolist(),
        missing["label"].tolist(),
        codes,
        vectors,
        run.settings.embed,
        config,
        workspace,
    )
    scored = {
        interpretation_id: {"score_embedding": float(score)}
        for interpretation_id, score in zip(missing["interpretation_id"], result.scores, strict=True)
        if np.isfinite(score)
    }
    workspace.labels.set_scores(record.run_id, scored)
    progress(Progress("embedding scores", len(missing), len(missing)))
    return {basis: result.basis.count(basis) for basis in ("held_out", "in_sample", "too_few")}


def _store_detection_scores(
    workspace: Workspace,
    record: RunRecord,
    codes: sp.csc_matrix,
    interpretations: pd.DataFrame,
    config: ScoreConfig,
    detector: Detector,
    progress: ProgressCallback,
    should_stop: StopCheck,
) -> Batch:
    candidates = interpretations[interpretations["score_detection"].isna()]
    if not config.detect_keyword_labels:
        candidates = candidates[candidates["source"] != KEYWORD_SOURCE]
    documents = {feature: scoring_documents(codes, feature, config) for feature in set(candidates["feature_id"])}
    candidates = candidates[[documents[feature].basis != "too_few" for feature in candidates["feature_id"]]]
    batch = Batch("detection", len(candidates), config.max_consecutive_failures, progress, should_stop)
    if candidates.empty:
        return batch
    texts = workspace.documents(record.dataset_id, ["position", "text"])["text"].to_numpy()
    detector.check()
    with Pending(lambda made: workspace.labels.set_scores(record.run_id, dict(made))) as pending:
        for row in candidates.itertuples():
            if not batch.keep_going():
                break
            try:
                score = _detection(detector, row.label, documents[row.feature_id], texts, config, row.feature_id)
            except LabellingError as error:
                batch.failed(f"Feature {row.feature_id} ({row.label}): {error}")
                continue
            pending.add((row.interpretation_id, {"score_detection": score}))
            batch.succeeded(f"feature {row.feature_id}: {row.label} {score:.2f}")
    return batch


def _detection(
    detector: Detector,
    label: str,
    documents: ScoringDocuments,
    texts: np.ndarray,
    config: ScoreConfig,
    feature: int,
) -> float:
    positives = list(texts[documents.positives[: config.n_detect_positives]])
    negatives = list(texts[documents.negatives[: config.n_detect_negatives]])
    return detection_score(detector, label, positives, negatives, seed=config.seed + feature)


def score_baseline(workspace: Workspace, run: LoadedRun, config: ScoreConfig = ScoreConfig()) -> ScoreBaseline:
    """Mean embedding score of the label each active feature shows, and of the same labels shuffled across the
    features (seeded by `config.seed`): the distance between the two is what the labels are worth.

    `run`: the run as the caller loaded it (its codes are used, never read again); the labels and their scores are
    read as stored now, so labels named or scored since it was loaded count."""
    record = run.record
    config = covering_keywords(config, run.settings.keywords.n_top_documents)
    features = with_shown_labels(workspace, record.run_id, run.features[["feature_id", "density", "n_strong"]])
    active = features[features["density"] > 0]
    labelled = active[active["label"].notna()]
    support = score_support(labelled["n_strong"].to_numpy(), run.codes.shape[0], config)
    scoreable = labelled[[basis != "too_few" for basis in support.basis]]
    if scoreable.empty:
        return ScoreBaseline(0, float("nan"), float("nan"), len(labelled))
    vectors = workspace.stored_vectors(record.dataset_id, record.embedding_key)  # only the scored rows are read
    ids, labels = shuffled_labels(
        scoreable["feature_id"].tolist(), scoreable["label"].tolist(), run.codes, config, config.seed
    )
    shuffled = label_embedding_scores(ids, labels, run.codes, vectors, run.settings.embed, config, cache=workspace)
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
    interpretations = workspace.labels.of(record.run_id)
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
