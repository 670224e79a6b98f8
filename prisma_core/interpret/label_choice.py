"""Which label a feature shows, chosen by the labels' measured scores (pandas only: every view reads it).

The label the analyst chose (or wrote) is shown. Otherwise a language model's label (the newest) replaces the
keywords unless its embedding score says it describes the feature worse: lower than the keywords' by more than
LABEL_MARGIN, or no better than chance (CHANCE) where the keywords score higher. Then the keywords stay shown, the
model's label is kept (to be chosen on the feature's card or the Labels page), and `label_note` says why.
"""

from __future__ import annotations

import pandas as pd

from prisma_core.store.schemas import KEYWORD_SOURCE, MANUAL_SOURCE

CHANCE = 0.5
"""Both scores are 0.5 for a label that says nothing about its feature (ROC-AUC and balanced accuracy)."""
LABEL_MARGIN = 0.05
"""How much lower than the keywords' a model's label may score and still replace them: about the spread of an
embedding score over 200 documents (`label_scores.auc_band`), so a label is not passed over for noise."""
SHOWN_COLUMNS = [
    "feature_id",
    "label",
    "description",
    "label_source",
    "score_embedding",
    "score_detection",
    "interpretation_id",
    "label_note",
    "set_aside",
]


def resolve_labels(interpretations: pd.DataFrame) -> pd.DataFrame:
    """The label shown for each feature (SHOWN_COLUMNS): the one the analyst preferred; else the newest LLM label
    unless it scores worse than the keywords (`weaker`), else the keywords (an analyst's label no longer preferred,
    its rename undone, is not shown). `set_aside`: the interpretation id of a model's label not shown for its score,
    with `label_note` saying why ("" and None otherwise)."""
    newest = interpretations.sort_values(["feature_id", "created_at"], kind="stable")
    source = newest["source"]
    preferred = _last(newest[newest["preferred"].astype(bool)])
    keywords = _last(newest[source == KEYWORD_SOURCE])
    model = _last(newest[~source.isin([KEYWORD_SOURCE, MANUAL_SOURCE])])
    fallback = _last(newest[source != MANUAL_SOURCE])
    weak = weaker(model["score_embedding"], keywords["score_embedding"].reindex(model.index))
    automatic = pd.concat([model[~weak], keywords.drop(model.index[~weak], errors="ignore")])
    automatic = pd.concat([automatic, fallback.drop(automatic.index, errors="ignore")])
    chosen = pd.concat([preferred, automatic.drop(preferred.index, errors="ignore")]).sort_index()
    set_aside = model[weak].drop(preferred.index, errors="ignore")
    notes = pd.Series(
        [_note(row.label, row.score_embedding, keywords.at[f, "score_embedding"]) for f, row in set_aside.iterrows()],
        index=set_aside.index,
        dtype=object,
    )
    shown = chosen.rename(columns={"source": "label_source"}).assign(
        label_note=notes.reindex(chosen.index).fillna(""),
        set_aside=set_aside["interpretation_id"].reindex(chosen.index).astype(object).where(lambda s: s.notna(), None),
    )
    return shown.reset_index()[SHOWN_COLUMNS]


def _last(rows: pd.DataFrame) -> pd.DataFrame:
    """The newest row of each feature, indexed by feature_id (rows sorted oldest first)."""
    return rows.groupby("feature_id").tail(1).set_index("feature_id")


def weaker(model_score: pd.Series, keyword_score: pd.Series) -> pd.Series:
    """Where a model's label describes its feature worse than the keywords, by their embedding scores: lower by more
    than LABEL_MARGIN, or at or below chance while the keywords score higher. Unscored labels are never weaker."""
    model, keywords = model_score.astype(float), keyword_score.astype(float)
    both = model.notna() & keywords.notna()
    return both & ((model < keywords - LABEL_MARGIN) | ((model <= CHANCE) & (keywords > model)))


def _note(model_label: str, model_score: float, keyword_score: float) -> str:
    chance = ", no better than chance (0.50)" if model_score <= CHANCE else ""
    return (
        f"The language model named this feature “{model_label}”, but that label scores {model_score:.2f}{chance} "
        f"where the keywords score {keyword_score:.2f}: the keywords stay shown. Pick either label on the "
        "feature's card."
    )
