"""Group labels: name families and themes from the labels their members show now and their strongest documents.

Labels are written every few groups and when the batch ends, however it ends (a hard kill loses at most the last
few); a group whose labelling fails keeps its keyword label.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from prisma_core.errors import LabellingError
from prisma_core.interpret.labelling.job import (
    Batch,
    LabelConfig,
    LabelSummary,
    StopCheck,
    never_stop,
    shown_texts,
)
from prisma_core.interpret.labelling.planning import chosen
from prisma_core.interpret.labelling.storing import (
    FAMILIES,
    GROUP_SAVE_EVERY,
    THEMES,
    record_batch,
    save_group_labels,
)
from prisma_core.interpret.ollama_labeller import LabelResult, OllamaConfig, OllamaLabeller, has_model
from prisma_core.progress import ProgressCallback, ignore_progress
from prisma_core.runs import load_run, resolve_labels
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
    codes: sp.csc_matrix,
    labeller: OllamaLabeller,
    config: LabelConfig,
) -> LabelResult:
    """Name a group from the labels its members show now (`shown`: feature id -> label) and its documents (`texts`:
    position -> text, holding at least those of `group_documents`).

    Raises LabellingError when the model gives no usable answer; nothing is stored here."""
    evidence, contrast = group_documents(
        codes, group.members, labeller.config.n_evidence, labeller.config.n_contrast, config.seed
    )
    member_labels = [shown[member] for member in group.members[1:]][: config.max_family_children]
    return labeller.label_group(
        group.kind, shown[group.members[0]], member_labels, [texts[p] for p in evidence], [texts[p] for p in contrast]
    )


GROUP_TABLES = {table.kind: table for table in (FAMILIES, THEMES)}
"""The kinds of group a batch can name ("family", "theme") and where each is stored."""


def label_groups(
    workspace: Workspace,
    run_id: str | None,
    kind: str,
    ollama: OllamaConfig,
    config: LabelConfig = LabelConfig(),
    progress: ProgressCallback = ignore_progress,
    should_stop: StopCheck = never_stop,
    group_ids: Sequence[int] | None = None,
) -> LabelSummary:
    """Name each family or theme (`kind`) of the run, or those in `group_ids`: a family from the labels its parent
    and children show now (preferred, LLM, keywords), a theme from the labels of its most typical features, each
    with the documents where those features are strongest.

    Groups already named by this model are skipped unless `config.relabel`; a group that fails keeps its label.
    Labels are saved every few groups and when the batch ends, onto the groups stored at that moment: a group
    rebuilt in the meantime (other members) keeps its new label."""
    table = GROUP_TABLES[kind]
    run = load_run(workspace, run_id)
    record = run.record
    groups = table.read(workspace, record.run_id)
    wanted = chosen(groups, table.id_key, group_ids)
    todo = [g for g in wanted if config.relabel or not has_model([g["label_source"]], ollama.model)]
    shown = resolve_labels(workspace.interpretations(record.run_id)).set_index("feature_id")["label"]
    made: dict[int, LabelResult] = {}
    with OllamaLabeller(ollama) as labeller:
        if todo:
            labeller.check()
        batch = Batch(table.stage, len(todo), config.max_consecutive_failures, progress, should_stop)
        codes = sp.csc_matrix(run.codes)
        named = [
            FeatureGroup(
                table.kind,
                f"{table.kind.capitalize()} {int(row[table.id_key])}",
                [int(m) for m in row[table.members_key]],
            )
            for row in todo
        ]
        n_evidence, n_contrast = labeller.config.n_evidence, labeller.config.n_contrast
        placed = [group_documents(codes, group.members, n_evidence, n_contrast, config.seed) for group in named]
        texts = shown_texts(workspace, record.dataset_id, placed)
        try:
            for row, group in zip(todo, named, strict=True):
                if not batch.keep_going():
                    break
                group_id = int(row[table.id_key])
                try:
                    result = label_group(group, shown, texts, codes, labeller, config)
                except LabellingError as error:
                    batch.failed(f"{group.name}: {error}")
                    continue
                made[group_id] = result
                batch.succeeded(f"{table.kind} {group_id}: {result.label}")
                if len(made) % GROUP_SAVE_EVERY == 0:
                    save_group_labels(workspace, record.run_id, table, groups, made)
        finally:
            if made:
                save_group_labels(workspace, record.run_id, table, groups, made)
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
        record_batch(workspace, record, table.kind, ollama, config, summary)
    return summary
