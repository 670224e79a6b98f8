"""Labels an analyst writes: stored as one more interpretation of the feature, and made the one shown."""

from __future__ import annotations

import uuid

from prisma_core.interpret.prompts import MAX_LABEL_CHARS
from prisma_core.names import MAX_DESCRIPTION_CHARS, checked_description, checked_name
from prisma_core.store import Workspace
from prisma_core.store.schemas import MANUAL_SOURCE

MAX_MANUAL_DESCRIPTION_CHARS = MAX_DESCRIPTION_CHARS
"""The longest description an analyst can store with a label."""


def save_manual_label(workspace: Workspace, run_id: str, feature_id: int, label: str, description: str = "") -> str:
    """Stores the analyst's label (and description) as a new interpretation, prefers it, and returns its id.

    A label that shows nothing or is longer than MAX_LABEL_CHARS, or a description longer than
    MAX_MANUAL_DESCRIPTION_CHARS, is refused (`names.checked_name`)."""
    label, description = checked_name(label, "A label", MAX_LABEL_CHARS), checked_description(description)
    interpretation_id = uuid.uuid4().hex[:12]
    row = {
        "feature_id": int(feature_id),
        "interpretation_id": interpretation_id,
        "label": label,
        "description": description,
        "source": MANUAL_SOURCE,
    }
    workspace.labels.add(run_id, [row])
    workspace.labels.prefer(run_id, feature_id, interpretation_id)
    return interpretation_id
