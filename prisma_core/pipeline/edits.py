"""The door to the analyst's edits of a run: rename, merge, split, hide and pin a concept, undo; the edits carried to
a new run of the same data and the runs compared; the notices of edits a new grouping changed; the lengths of a name
the analyst writes."""

from prisma_core.carryover.carry import (
    STATUSES,
    apply_by_hand,
    carry_edits,
    compare_runs,
    counts,
    match_runs,
    previous_edited_run,
)
from prisma_core.carryover.edit_notices import EditNotice, carried_here, concept_name, edit_notices, reapply, sentence
from prisma_core.carryover.edit_notices import dismiss as dismiss_notice
from prisma_core.curation.edits import (
    DISMISS,
    LEVELS,
    UNDO,
    active_edits,
    describe,
    hide,
    merge_themes,
    pin,
    rename,
    split_theme,
    undo,
)
from prisma_core.interpret.manual_labels import MAX_MANUAL_DESCRIPTION_CHARS
from prisma_core.interpret.prompts import MAX_LABEL_CHARS

__all__ = [
    "DISMISS",
    "LEVELS",
    "MAX_LABEL_CHARS",
    "MAX_MANUAL_DESCRIPTION_CHARS",
    "STATUSES",
    "UNDO",
    "EditNotice",
    "active_edits",
    "apply_by_hand",
    "carried_here",
    "carry_edits",
    "compare_runs",
    "concept_name",
    "counts",
    "describe",
    "dismiss_notice",
    "edit_notices",
    "hide",
    "match_runs",
    "merge_themes",
    "pin",
    "previous_edited_run",
    "reapply",
    "rename",
    "sentence",
    "split_theme",
    "undo",
]
