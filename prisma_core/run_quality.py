"""How a trained run is named and judged for an analyst (the app and the report): a readable name, its quality in
words, and overfitting (a run that describes its training documents much better than documents it has not seen)."""

from __future__ import annotations

import math
from datetime import datetime

from prisma_core.embed.config import DEFAULT_MODEL
from prisma_core.store import RunRecord

DEFAULT_DIM = 384  # all-MiniLM-L6-v2, the bundled model
GOOD, FAIR = 0.7, 0.5  # share of detail captured on documents kept aside
OVERFIT_GAP = 0.15  # held-out FVU this much above train FVU...
OVERFIT_RATIO = 2.0  # ...and at least this many times it


def detail_captured(run: RunRecord) -> float | None:
    """1 - FVU on the held-out documents (None without a holdout)."""
    fvu = run.metrics.get("fvu_holdout")
    return None if not isinstance(fvu, float) or math.isnan(fvu) else 1.0 - fvu


def quality_words(run: RunRecord) -> str:
    captured = detail_captured(run)
    if captured is None:
        return "quality not measured"
    word = "good" if captured >= GOOD else "fair" if captured >= FAIR else "rough"
    return f"{word} ({captured:.0%} of detail)"


def n_features(run: RunRecord) -> int | None:
    sae, embed = run.config.get("sae", {}), run.config.get("embed", {})
    if embed.get("model", DEFAULT_MODEL) != DEFAULT_MODEL or not sae.get("expansion_factor"):
        return None
    return int(sae["expansion_factor"]) * DEFAULT_DIM


def when(iso: str) -> str:
    try:
        return datetime.fromisoformat(iso).strftime("%d %b %Y %H:%M")
    except ValueError:
        return iso[:16].replace("T", " ")


def run_name(run: RunRecord, dataset_name: str | None = None) -> str:
    """E.g. "MTSamples demo · 23 Nov 2026 12:20 · 3,072 features · fair (54% of detail) · overfitted"."""
    size = n_features(run)
    sae = run.config.get("sae", {})
    parts = [dataset_name] if dataset_name else []
    parts += [
        when(run.created_at),
        f"{size:,} features" if size else f"{sae.get('expansion_factor')} features per embedding dimension",
        quality_words(run),
    ]
    if overfitting(run):
        parts.append("overfitted")
    return " · ".join(parts)


def overfitting(run: RunRecord) -> str | None:
    """What to tell an analyst when the run reproduces its training documents much better than unseen ones."""
    train, holdout = run.metrics.get("fvu_train"), run.metrics.get("fvu_holdout")
    if not isinstance(train, float) or not isinstance(holdout, float) or math.isnan(holdout) or math.isnan(train):
        return None
    if holdout - train < OVERFIT_GAP or holdout < OVERFIT_RATIO * train:
        return None
    sae = run.config.get("sae", {})
    epochs, expansion = int(sae.get("epochs", 1)), int(sae.get("expansion_factor", 1))
    fixes = []
    if epochs > 1:
        fixes.append(f"fewer epochs (try {max(1, epochs // 2)} instead of {epochs})")
    if expansion > 1:
        fixes.append(f"a lower expansion factor (try {max(1, expansion // 2)} instead of {expansion})")
    fixes.append("more documents")
    fix = fixes[0] if len(fixes) == 1 else f"{', '.join(fixes[:-1])} or {fixes[-1]}"
    return (
        f"This run describes the documents it was trained on almost perfectly ({1 - train:.0%} of their detail) but "
        f"documents it has not seen much less well ({1 - holdout:.0%}): it has memorised its training documents "
        "instead of learning general concepts (overfitting). Its features may be less reliable on new documents. "
        f"To fix it, train again with {fix}."
    )
