"""Feature labels: ask the model about each active feature and store the labels, with their scores, a few at a time.

Labels are scored and written together (`job.Pending`: every few labels, every half minute and when the batch ends,
however it ends). A hard kill loses at most the labels not yet written; a rerun skips the features that already hold
a label from the same model and prompt version, so an interrupted batch resumes where it stopped. A feature whose
labelling fails (no usable answer after the retries, a timeout, a dropped connection) keeps its labels and is
counted.
"""

from collections.abc import Sequence

import scipy.sparse as sp

from prisma_core.concepts import analysis
from prisma_core.errors import LabellingError
from prisma_core.interpret.label_scores import ScoreConfig, covering_keywords, label_embedding_scores
from prisma_core.interpret.labeller import Labeller, LabelRequest, LabelResult
from prisma_core.interpret.prompts import CHARS_PER_TOKEN, PASSAGE_TOKENS
from prisma_core.pipeline.evidence import feature_quotes
from prisma_core.pipeline.labelling.job import (
    Batch,
    LabelConfig,
    LabelSummary,
    Pending,
    StopCheck,
    never_stop,
    shown_texts,
)
from prisma_core.pipeline.labelling.planning import labelled_by, selected_features
from prisma_core.pipeline.labelling.storing import record_batch
from prisma_core.progress import ProgressCallback, ignore_progress
from prisma_core.reading.runs import LoadedRun
from prisma_core.store import Workspace


def label_run(
    workspace: Workspace,
    run: LoadedRun,
    labeller: Labeller,
    config: LabelConfig = LabelConfig(),
    feature_ids: Sequence[int] | None = None,
    progress: ProgressCallback = ignore_progress,
    should_stop: StopCheck = never_stop,
) -> LabelSummary:
    """Label every active feature of the run, or the active ones among `feature_ids`; `run` as the caller loaded it
    (its codes are used, never read again).

    Evidence: the passages where the feature fires most (`pipeline.evidence`, found first for a run trained before
    they were kept) and the labeller's `n_shown` top-activating documents; contrast: its `n_shown` random documents
    where it is zero. Raises LabellingError before writing anything if the labeller cannot label (`check`: Ollama
    or the model missing). The caller owns the labeller (and closes its connection).
    """
    record = run.record
    selected = selected_features(len(run.features), feature_ids)
    wanted = [feature for feature in selected if run.features["density"].iat[feature] > 0]
    done = (
        set() if config.relabel else labelled_by(workspace.labels.of(record.run_id), labeller.source, labeller.version)
    )
    todo = [feature for feature in wanted if feature not in done]
    if todo:
        labeller.check()
    batch = Batch("label", len(todo), config.max_consecutive_failures, progress, should_stop)
    if todo:
        _label_features(workspace, run, todo, labeller, labeller.n_shown, config, batch)
    summary = batch.summary(labeller.source, labeller.host, len(wanted) - len(todo), len(selected) - len(wanted))
    if todo:
        record_batch(workspace, record, "feature", labeller, config, summary)
    return summary


def _label_features(
    workspace: Workspace,
    run: LoadedRun,
    todo: list[int],
    labeller: Labeller,
    n_shown: tuple[int, int],
    config: LabelConfig,
    batch: Batch,
) -> None:
    """Asks about each feature of `todo` in turn, showing (`n_shown`) its n_evidence strongest documents and
    n_contrast where it is silent; the labels are stored a few at a time, and when the batch ends."""
    codes = sp.csc_matrix(run.codes)
    n_evidence, n_contrast = n_shown
    shown = {
        feature: (
            analysis.top_documents(codes, feature, n_evidence)["position"].to_numpy(),
            analysis.zero_documents(codes, feature, n_contrast, seed=config.seed + feature),
        )
        for feature in todo
    }
    text_of = shown_texts(workspace, run.record.dataset_id, shown.values())
    quotes = feature_quotes(workspace, run, todo, max_chars=PASSAGE_TOKENS * CHARS_PER_TOKEN)
    passages_of = quotes.groupby("feature_id")["quote"].agg(list).to_dict()

    def store(made: list[tuple[int, LabelResult]]) -> None:
        _store_labels(workspace, run, codes, n_evidence, made)

    with Pending(store) as pending:
        for feature in todo:
            if not batch.keep_going():
                return
            evidence, contrast = shown[feature]
            try:
                request = LabelRequest("feature", evidence, contrast, text_of, passages=passages_of.get(feature, []))
                result = labeller.label(request)
            except LabellingError as error:
                batch.failed(f"Feature {feature}: {error}")
                continue
            batch.succeeded(f"feature {feature}: {result.label}")
            pending.add((feature, result))


def _store_labels(
    workspace: Workspace, run: LoadedRun, codes: sp.csc_matrix, n_evidence: int, made: list[tuple[int, LabelResult]]
) -> None:
    """Score the labels made (embedding score, in one batch) and store them in one commit. codes: [n_docs,
    n_features]."""
    record = run.record
    score_config = covering_keywords(ScoreConfig(), max(run.settings.keywords.n_top_documents, n_evidence))
    vectors = workspace.stored_vectors(record.dataset_id, record.embedding_key)  # only the scored rows are read
    scores = label_embedding_scores(
        [feature for feature, _ in made],
        [result.label for _, result in made],
        codes,
        vectors,
        run.settings.embed,
        score_config,
        workspace,
    ).scores
    rows = [
        {
            "feature_id": feature,
            "label": result.label,
            "description": result.description,
            "source": result.model,
            "prompt_version": result.prompt_version,
            "score_embedding": float(score),
        }
        for (feature, result), score in zip(made, scores, strict=True)
    ]
    workspace.labels.add(record.run_id, rows)
