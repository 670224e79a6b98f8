"""Group labels: name families and themes from the labels their members show now and their strongest documents.

Labels are written every few groups and when the batch ends, however it ends (a hard kill loses at most the last
few); a group whose labelling fails keeps its keyword label.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from prisma_core.concepts import analysis
from prisma_core.errors import LabellingError
from prisma_core.interpret.label_choice import weaker
from prisma_core.interpret.label_scores import ScoreConfig, covering_keywords, label_embedding_scores
from prisma_core.interpret.labeller import Labeller, LabelRequest, LabelResult
from prisma_core.names import LEVEL_WORDS
from prisma_core.pipeline.labelling.job import (
    Batch,
    LabelConfig,
    LabelSummary,
    SetAside,
    StopCheck,
    never_stop,
    shown_texts,
)
from prisma_core.pipeline.labelling.planning import asked, chosen
from prisma_core.pipeline.labelling.storing import (
    FAMILIES,
    GROUP_SAVE_EVERY,
    SUBTHEMES,
    THEMES,
    GroupTable,
    record_batch,
    save_group_labels,
)
from prisma_core.progress import ProgressCallback, ignore_progress
from prisma_core.reading.runs import LoadedRun, resolve_labels
from prisma_core.store import Workspace


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
    texts: Mapping[int, str],
    placed: tuple[np.ndarray, np.ndarray],
    labeller: Labeller,
    config: LabelConfig,
) -> LabelResult:
    """Name a group from the labels its members show now (`shown`: feature id -> label) and its documents: `placed`,
    its (evidence, contrast) positions from `group_documents`, and `texts`, position -> text holding them.

    Raises LabellingError when the model gives no usable answer; nothing is stored here."""
    evidence, contrast = placed
    member_labels = [shown[member] for member in group.members[1:]][: config.max_family_children]
    request = LabelRequest(group.kind, evidence, contrast, texts, [shown[group.members[0]], *member_labels])
    return labeller.label(request)


GROUP_TABLES = {table.kind: table for table in (FAMILIES, THEMES, SUBTHEMES)}
"""The kinds of group a batch can name ("family", "theme", "subtheme") and where each is stored."""


def label_groups(
    workspace: Workspace,
    run: LoadedRun,
    kind: str,
    labeller: Labeller,
    config: LabelConfig = LabelConfig(),
    progress: ProgressCallback = ignore_progress,
    should_stop: StopCheck = never_stop,
    group_ids: Sequence[int] | None = None,
) -> LabelSummary:
    """Name each family, theme or sub-theme (`kind`) of the run, or those in `group_ids`: a family from the labels its
    parent and children show now (preferred, LLM, keywords), a theme or sub-theme from the labels of its most typical
    features, each with the documents where those features are strongest.

    Groups already named by this model are skipped unless `config.relabel`; a group that fails keeps its label. A
    theme or sub-theme that holds no feature of its own (every feature fits another better) has nothing to be named
    from: it keeps its keyword name and is counted in `n_inactive`.
    Labels are saved every few groups and when the batch ends, onto the groups stored at that moment: a group
    rebuilt in the meantime (other members) keeps its new label."""
    table = GROUP_TABLES[kind]
    groups = table.read(workspace, run.record.run_id)
    wanted = chosen(groups, table.id_key, group_ids)
    todo = [g for g in wanted if asked(g, table.members_key, config, labeller.source)]
    featureless = sum(not len(g[table.members_key]) for g in wanted)
    set_aside: list[SetAside] = []
    if todo:
        labeller.check()
    batch = Batch(table.stage, len(todo), config.max_consecutive_failures, progress, should_stop)
    if todo:
        set_aside = _name_groups(workspace, run, table, groups, todo, labeller, labeller.n_shown, config, batch)
    counts = (len(wanted) - len(todo) - featureless, featureless)
    summary = replace(batch.summary(labeller.source, labeller.host, *counts), set_aside=set_aside)
    if todo:
        record_batch(workspace, run.record, table.kind, labeller, config, summary)
    return summary


def _name_groups(
    workspace: Workspace,
    run: LoadedRun,
    table: GroupTable,
    groups: list[dict[str, Any]],
    todo: list[dict[str, Any]],
    labeller: Labeller,
    n_shown: tuple[int, int],
    config: LabelConfig,
    batch: Batch,
) -> list[SetAside]:
    """Names the groups of `todo` in turn, showing (`n_shown`) n_evidence documents where each is strongest and
    n_contrast where it is silent; the names are saved every few groups and when the batch ends, however it ends,
    each only if it describes its group at least as well as the name it has (`better_names`). Returns the names set
    aside."""
    shown = resolve_labels(workspace.labels.of(run.record.run_id)).set_index("feature_id")["label"]
    codes = sp.csc_matrix(run.codes)
    named = {
        int(row[table.id_key]): FeatureGroup(
            table.kind, f"{LEVEL_WORDS[table.kind]} {int(row[table.id_key])}", [int(m) for m in row[table.members_key]]
        )
        for row in todo
    }
    n_evidence, n_contrast = n_shown
    placed = {
        group_id: group_documents(codes, group.members, n_evidence, n_contrast, config.seed)
        for group_id, group in named.items()
    }
    texts = shown_texts(workspace, run.record.dataset_id, placed.values())
    made: dict[int, LabelResult] = {}
    set_aside: list[SetAside] = []

    def save() -> None:
        kept, aside = better_names(workspace, run, table, {int(g[table.id_key]): g for g in todo}, made, n_evidence)
        save_group_labels(workspace, run.record.run_id, table, groups, kept)
        set_aside.extend(aside)
        made.clear()

    try:
        for group_id, group in named.items():
            if not batch.keep_going():
                break
            try:
                result = label_group(group, shown, texts, placed[group_id], labeller, config)
            except LabellingError as error:
                batch.failed(f"{group.name}: {error}")
                continue
            made[group_id] = result
            batch.succeeded(f"{table.kind} {group_id}: {result.label}")
            if len(made) >= GROUP_SAVE_EVERY:
                save()
    finally:
        if made:
            save()
    return set_aside


def better_names(
    workspace: Workspace,
    run: LoadedRun,
    table: GroupTable,
    rows: Mapping[int, Mapping[str, Any]],
    made: Mapping[int, LabelResult],
    n_evidence: int,
) -> tuple[dict[int, LabelResult], list[SetAside]]:
    """The names made that describe their group at least as well as the name it has (`label_choice.weaker`, by
    their embedding scores on the group's documents the model was not shown), and the others, set aside.

    A group's documents are those where any of its features is strong (`analysis.strong_codes`), its strength
    there their summed activation."""
    if not made:
        return {}, []
    score_config = covering_keywords(ScoreConfig(), max(run.settings.keywords.n_top_documents, n_evidence))
    vectors = workspace.stored_vectors(run.record.dataset_id, run.record.embedding_key)
    strong = sp.csc_matrix(analysis.strong_codes(sp.csr_matrix(run.codes)))
    kept, aside = {}, []
    for group_id, result in made.items():
        row = rows[group_id]
        members = [int(m) for m in row[table.members_key]]
        column = sp.csr_matrix(strong[:, members].sum(axis=1))
        scores = label_embedding_scores(
            [0, 0], [result.label, str(row["label"])], column, vectors, run.settings.embed, score_config, workspace
        ).scores
        if weaker(pd.Series([scores[0]]), pd.Series([scores[1]])).iloc[0]:
            aside.append(
                SetAside(table.kind, group_id, result.label, float(scores[0]), str(row["label"]), float(scores[1]))
            )
        else:
            kept[group_id] = result
    return kept, aside
