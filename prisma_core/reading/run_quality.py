"""How a trained run is named and judged for an analyst (the app and the report): a readable name, its quality in
words, how often its features came back, and overfitting (a run that describes its training documents much better
than documents it has not seen), and documents added since training (`Placement`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from datetime import datetime

from prisma_core.run_shape.run_settings import run_settings
from prisma_core.sae.config import SAEConfig
from prisma_core.store import RunRecord, Workspace
from prisma_core.store.stages import PLACEMENT

GOOD, FAIR = 0.5, 0.3  # share of detail captured on documents kept aside (a few features per document keep part of it)
MOSTLY_DEAD = 0.5  # a run with a larger share of features that never fire is called poor
OVERFIT_GAP = 0.15  # held-out FVU this much above train FVU...
OVERFIT_RATIO = 2.0  # ...and at least this many times it


def detail_captured(run: RunRecord) -> float | None:
    """1 - FVU on the held-out documents (None without a holdout)."""
    fvu = run.metrics.get("fvu_holdout")
    return None if not isinstance(fvu, float) or math.isnan(fvu) else 1.0 - fvu


def never_firing(run: RunRecord) -> float | None:
    """The share of the run's features that fire on no training document (None when not recorded)."""
    dead = run.metrics.get("dead_fraction")
    return dead if isinstance(dead, float) and not math.isnan(dead) else None


def mostly_never_firing(run: RunRecord) -> float | None:
    """The share of features that never fire when it is above MOSTLY_DEAD (the run is then poor, whatever detail it
    keeps), else None."""
    dead = never_firing(run)
    return dead if dead is not None and dead > MOSTLY_DEAD else None


def quality_words(run: RunRecord) -> str:
    """E.g. "good (71% of detail)"; "poor" whatever the detail when most features never fire (then the documents
    differ too little for the features asked for: a category or an id chosen as the text, say)."""
    captured = detail_captured(run)
    if captured is None:
        return "quality not measured"
    if (dead := mostly_never_firing(run)) is not None:
        return f"poor ({dead:.0%} of features never fire)"
    word = "good" if captured >= GOOD else "fair" if captured >= FAIR else "rough"
    return f"{word} ({captured:.0%} of detail)"


SHARES = (
    (0.1, "a tenth"),
    (0.2, "a fifth"),
    (0.25, "a quarter"),
    (1 / 3, "a third"),
    (0.4, "two fifths"),
    (0.5, "half"),
    (0.6, "three fifths"),
    (2 / 3, "two thirds"),
    (0.75, "three quarters"),
    (0.8, "four fifths"),
    (0.9, "nine tenths"),
)
"""Shares an analyst reads at a glance, for the detail a run captures."""


def detail_in_words(run: RunRecord) -> str | None:
    """E.g. "explains about half of what sets each document apart (52%, on documents it was not trained on)": what
    the detail captured means (the variation between documents that the features reproduce); None when not
    measured."""
    captured = detail_captured(run)
    if captured is None:
        return None
    share = "almost none" if captured < 0.05 else "about " + min(SHARES, key=lambda pair: abs(pair[0] - captured))[1]
    return f"explains {share} of what sets each document apart ({captured:.0%}, on documents it was not trained on)"


def n_features(run: RunRecord) -> int | None:
    """The features the run kept (None for a run that recorded neither how many it kept nor how many it trained)."""
    return _n_features(run, run_settings(run).sae)


def _n_features(run: RunRecord, sae: SAEConfig | None) -> int | None:
    kept = run.metrics.get("features_kept") or (sae.n_features if sae is not None else None)
    return int(kept) if kept else None


def comes_back(run: RunRecord) -> str:
    """E.g. "52 of 60 (3 trainings)": the run's features found in every training it compared; "not checked" for a
    run that trained once."""
    compared, kept, everywhere = (run.metrics.get(key) for key in ("n_trainings", "features_kept", "found_in_all"))
    if not compared or compared < 2 or kept is None or everywhere is None:
        return "not checked (trained once)"
    return f"{everywhere:,} of {kept:,} ({compared} trainings)"


def when(iso: str) -> str:
    try:
        return datetime.fromisoformat(iso).strftime("%d %b %Y %H:%M")
    except ValueError:
        return iso[:16].replace("T", " ")


def run_name(run: RunRecord, dataset_name: str | None = None) -> str:
    """E.g. "MTSamples demo · 23 Nov 2026 12:20 · 64 features · fair (46% of detail) · overfitted"."""
    sae = run_settings(run).sae
    size = _n_features(run, sae)
    parts = [dataset_name] if dataset_name else []
    parts += [when(run.created_at), *([f"{size:,} features"] if size else []), quality_words(run)]
    if _overfitting(run, sae):
        parts.append("overfitted")
    return " · ".join(parts)


def overfitting(run: RunRecord) -> str | None:
    """What to tell an analyst when the run reproduces its training documents much better than unseen ones."""
    return _overfitting(run, run_settings(run).sae)


def _overfitting(run: RunRecord, sae: SAEConfig | None) -> str | None:
    train, holdout = run.metrics.get("fvu_train"), run.metrics.get("fvu_holdout")
    if not isinstance(train, float) or not isinstance(holdout, float) or math.isnan(holdout) or math.isnan(train):
        return None
    if holdout - train < OVERFIT_GAP or holdout < OVERFIT_RATIO * train:
        return None
    epochs, features = (sae.epochs, sae.n_features) if sae is not None else (1, 0)
    fixes = []
    if epochs > 1:
        fixes.append(f"fewer epochs (try {max(1, epochs // 2)} instead of {epochs})")
    if features > 32:
        fixes.append(f"fewer features (try {features // 2} instead of {features})")
    fixes.append("more documents")
    fix = fixes[0] if len(fixes) == 1 else f"{', '.join(fixes[:-1])} or {fixes[-1]}"
    return (
        f"This run describes the documents it was trained on almost perfectly ({1 - train:.0%} of their detail) but "
        f"documents it has not seen much less well ({1 - holdout:.0%}): it has memorised its training documents "
        "instead of learning general concepts (overfitting). Its features may be less reliable on new documents. "
        f"To fix it, train again with {fix}."
    )


@dataclass(frozen=True)
class Placement:
    run_id: str
    n_before: int  # documents the run covered before
    n_added: int
    detail_added: float  # share of the new documents' variation the features reproduce (1 - FVU)
    detail_before: float  # the same, on the documents held out of training (else a sample of the run's)
    no_fit_added: float  # share of the new documents that fit no theme well
    no_fit_before: float
    reasons: list[str] = field(default_factory=list)  # why a new training would likely change the picture

    @property
    def retrain_advised(self) -> bool:
        return bool(self.reasons)

    def verdict(self) -> str:
        """In plain words, whether to train again."""
        if not self.n_added:
            return "The run already covers every document of the dataset."
        if not self.reasons:
            return (
                f"The {self.n_added:,} new documents fit this run as well as the others: training again would "
                "likely give the same picture."
            )
        return "Training again would likely change the picture: " + "; ".join(self.reasons) + "."


def placements(workspace: Workspace, run: RunRecord) -> list[Placement]:
    """The run's placements of added documents, oldest first (only those that placed any)."""
    names = [f.name for f in fields(Placement)]
    return [
        Placement(**{name: stage.summary[name] for name in names})
        for stage in workspace.stage_records.of(run.dataset_id, run.run_id)
        if stage.run_id == run.run_id and stage.stage == PLACEMENT and stage.summary.get("n_added")
    ]
