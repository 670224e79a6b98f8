"""Labels an analyst writes: stored as one more interpretation of the feature, and made the one shown."""

from __future__ import annotations

import uuid

from prisma_core.store import Workspace
from prisma_core.store.schemas import MANUAL_SOURCE


def save_manual_label(workspace: Workspace, run_id: str, feature_id: int, label: str, description: str = "") -> str:
    """Stores the analyst's label (and description) as a new interpretation, prefers it, and returns its id."""
    interpretation_id = uuid.uuid4().hex[:12]
    row = {
        "feature_id": int(feature_id),
        "interpretation_id": interpretation_id,
        "label": label.strip(),
        "description": description.strip(),
        "source": MANUAL_SOURCE,
    }
    workspace.add_interpretations(run_id, [row])
    workspace.prefer_interpretation(run_id, feature_id, interpretation_id)
    return interpretation_id
