"""The report's sections, in the order SECTIONS lists them: each a small function from the report's contents to a
Section (its title, its template in templates/ and what the template shows), or None to leave it out.

To add a section: write a function here and a template, and list it in SECTIONS. Every value reaches the page through
the templates, which escape all text."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from prisma_core import __version__
from prisma_core.compare import PLAIN_WORDS
from prisma_core.compare.groups import group_sizes
from prisma_core.compare.prediction import Predictors, group_predictors
from prisma_core.compare.prevalence import (
    group_comparison,
    percent,
    q_text,
    range_text,
    ranked,
    summarise,
    verdicts,
)
from prisma_core.names import LEVEL_PLURALS, feature_names, level_word, snippet, theme_names, unit_name
from prisma_core.pipeline.report.config import ReportConfig
from prisma_core.pipeline.report.contents import ReportContents
from prisma_core.pipeline.report.drawing import LegendEntry, map_dots, range_chart, theme_colour
from prisma_core.pipeline.report.timeline import timeline_chart
from prisma_core.pipeline.trends import level_trends
from prisma_core.reading.explore import level_units, named_units
from prisma_core.reading.overview import (
    coverage_sentence,
    families_of_themes,
    nested_subthemes,
    subtheme_documents,
    theme_documents,
    themes_table,
)
from prisma_core.reading.run_quality import (
    comes_back,
    detail_captured,
    detail_in_words,
    overfitting,
    quality_words,
    run_name,
)
from prisma_core.trends import NO_CHANGE, TOO_FEW
from prisma_core.trends import PLAIN_WORDS as TREND_WORDS
from prisma_core.trends.over_time import ranked as ranked_over_time
from prisma_core.trends.over_time import summarise as summarise_over_time

TITLE_CHARS = 140
TEXT_CHARS = 400
HOVER_CHARS = 160
THEME_FEATURES = 8
THEME_FAMILIES = 5
SUBTHEME_FEATURES = 4
SUBTHEME_DOCUMENTS = 2
WORDS_SAMPLE = 2_000


@dataclass(frozen=True)
class Section:
    anchor: str  # the section's id in the page (the table of contents links to it)
    title: str
    template: str  # in templates/
    context: dict[str, Any] = field(default_factory=dict)


def collection(contents: ReportContents) -> Section:
    """The collection in numbers."""
    run, dataset = contents.run, contents.dataset
    sample = contents.documents.sample(WORDS_SAMPLE)["text"].map(lambda text: len(str(text).split()))
    sampled = " (median of a random sample)" if len(sample) < dataset.n_documents else ""
    words = f"{int(np.median(sample)):,}{sampled}"
    shown = run.features[~run.features["hidden"]]
    numbers = [
        ("Documents", f"{dataset.n_documents:,}"),
        ("Words per document (median)", words),
        ("Themes", f"{len(run.theme_info) if run.themes is not None else 0:,}"),
        ("Families of concepts", f"{len(run.families):,}"),
        ("Features (single concepts) in use", f"{int((shown['density'] > 0).sum()):,} of {len(shown):,}"),
        ("Features describing each document", f"{run.settings.sae.k if run.settings.sae is not None else ''}"),
        ("Metadata columns", ", ".join(map(str, dataset.metadata_columns)) or "none"),
        ("Files", ", ".join(map(str, dataset.sources)) or "none"),
    ]
    report = dataset.report or {}
    if report.get("empty_ids"):
        numbers.append(("Empty documents left out", f"{len(report['empty_ids']):,}"))
    if report.get("duplicate_text_ids"):
        numbers.append(("Documents repeating an earlier text (kept)", f"{len(report['duplicate_text_ids']):,}"))
    return Section("collection", "The collection in numbers", "collection.html.j2", {"numbers": numbers})


@dataclass(frozen=True)
class ThemeEntry:
    """A theme as the report shows it; `children`: the level below it, where a sub-theme level slots in."""

    name: str
    description: str
    n_documents: int
    share: float
    colour: str
    features: list[str]
    families: list[str]
    n_families: int
    n_features: int
    documents: list[dict[str, str]]
    children: list[ThemeEntry] = field(default_factory=list)


def themes(contents: ReportContents) -> Section | None:
    """The themes, their names as the analyst left them, sizes, main features and families, typical documents."""
    run = contents.run
    if run.themes is None or run.theme_info.empty:
        return None
    n = contents.config.typical_documents
    table = themes_table(run, contents.documents, max(n, 1))
    members = run.themes.members().tocsc()
    tops = {int(t): theme_documents(run, int(t), n, members)["position"] for t in run.theme_info["theme_id"]}
    shown = np.unique(np.concatenate([np.empty(0, np.int64), *tops.values()]))  # a document typical of two themes
    read = contents.documents.at(shown).set_index("position")
    names = feature_names(run.features[~run.features["hidden"]])
    grouped = families_of_themes(run)
    entries = [
        ThemeEntry(
            name=unit_name("theme", info.theme_id, info.label),
            description=info.description if isinstance(info.description, str) else "",
            n_documents=int(row.documents),
            share=float(row.share),
            colour=theme_colour(int(info.theme_id)),
            features=[names[int(f)] for f in list(info.features)[:THEME_FEATURES]],
            families=[f"{f.label} ({len(f.members)} features)" for f in grouped.get(int(info.theme_id), [])][
                :THEME_FAMILIES
            ],
            n_families=int(row.families),
            n_features=int(row.features),
            documents=[_document(read.loc[p]) for p in tops[int(info.theme_id)]],
            children=_subtheme_entries(contents, int(info.theme_id), names),
        )
        for info, row in zip(run.theme_info.itertuples(), table.itertuples(), strict=True)
    ]
    context = {"themes": entries, "n_documents": contents.dataset.n_documents, "coverage": coverage_sentence(run)}
    return Section("themes", "Themes: what the collection is about", "themes.html.j2", context)


def _subtheme_entries(contents: ReportContents, theme_id: int, names: dict[int, str]) -> list[ThemeEntry]:
    """The theme's sub-themes as cards inside its own: name, size, main features, most typical documents."""
    run = contents.run
    if run.subthemes is None:
        return []
    n = min(contents.config.typical_documents, SUBTHEME_DOCUMENTS)
    info = nested_subthemes(run, theme_id)
    tops = [subtheme_documents(run, int(s), n)["position"] for s in info["subtheme_id"]]
    read = contents.documents.at(np.unique(np.concatenate([np.empty(0, np.int64), *tops]))).set_index("position")
    n_docs = max(run.codes.shape[0], 1)
    return [
        ThemeEntry(
            name=f"Sub-theme {int(sub.subtheme_id)}: {sub.label}",
            description="",
            n_documents=int(sub.n_documents),
            share=sub.n_documents / n_docs,
            colour=theme_colour(theme_id),
            features=[names[int(f)] for f in list(sub.features)[:SUBTHEME_FEATURES]],
            families=[],
            n_families=0,
            n_features=len(sub.features),
            documents=[_document(read.loc[p]) for p in top],
        )
        for sub, top in zip(info.itertuples(), tops, strict=True)
    ]


def evidence(contents: ReportContents) -> Section | None:
    """For the main concepts of each theme, the passages where each is strongest, quoted as written."""
    run, quotes = contents.run, contents.evidence
    if quotes.empty:
        return None
    names = feature_names(run.features[~run.features["hidden"]])
    by_feature = {int(f): rows for f, rows in quotes.groupby("feature_id", sort=False)}
    concepts = [
        {
            "name": names[feature],
            "quotes": [
                {"quote": row.quote, "title": snippet(row.title, TITLE_CHARS), "doc_id": row.doc_id}
                for row in rows.itertuples()
            ],
        }
        for feature, rows in by_feature.items()
    ]
    context = {"concepts": concepts}
    return Section("evidence", "Where the main concepts appear", "evidence.html.j2", context)


def _document(row: pd.Series) -> dict[str, str]:
    title = snippet(row["title"], TITLE_CHARS) if isinstance(row["title"], str) else ""
    return {"doc_id": str(row["doc_id"]), "title": title, "text": snippet(row["text"], TEXT_CHARS)}


def document_map(contents: ReportContents) -> Section | None:
    """Every drawn document a dot near the documents it resembles, coloured by its main theme."""
    run, points = contents.run, contents.map_points
    if run.themes is None or points.empty:
        return None
    strongest = run.themes.strongest()[points["position"].to_numpy()]
    read = contents.documents.at(points["position"]).reset_index(drop=True)
    names = theme_names(run.theme_info, strongest.tolist())
    titles = [
        f"{names[int(t)]}\n{doc_id}: {snippet(_title_or_text(title, text), HOVER_CHARS)}"
        for t, doc_id, title, text in zip(strongest, read["doc_id"], read["title"], read["text"], strict=True)
    ]
    dots = map_dots(points.assign(theme_id=strongest, title=titles))
    counts = pd.Series(strongest).value_counts()
    legend = [LegendEntry(names[int(t)], theme_colour(int(t)), int(counts[t])) for t in sorted(counts.index)]
    n_docs = run.codes.shape[0]
    sampled = f"A random sample of {len(points):,} of {n_docs:,} documents is drawn. " if len(points) < n_docs else ""
    caption = (
        f"{sampled}Each dot is a document; documents about similar things sit close together. The colour is the "
        "document's main theme. Hover a dot to read the start of the document."
    )
    return Section("map", "Map of the documents", "map.html.j2", {"dots": dots, "legend": legend, "caption": caption})


def _title_or_text(title: object, text: object) -> object:
    return title if isinstance(title, str) and title.strip() else text


def comparison(contents: ReportContents) -> Section:
    """The groups of one metadata column compared, with the statistics of every difference."""
    if contents.column is None or contents.groups is None:
        text = "This collection has no metadata column (such as a category, a date or a source) to compare groups by."
        return Section("groups", "Groups compared", "no_groups.html.j2", {"text": text})
    config, run = contents.config, contents.run
    units, unit_frame = level_units(run, config.level)
    if units.shape[1] == 0:
        text = (
            f"Every {level_word(config.level)} of this run is hidden, so the groups of {contents.column} have no "
            f"{LEVEL_PLURALS[config.level]} to be compared on: show one again to compare them."
        )
        return Section("groups", f"Groups compared: {contents.column}", "no_groups.html.j2", {"text": text})
    result = ranked(named_units(group_comparison(units, contents.groups), config.level, unit_frame), config.max_q)
    rows_of = dict(tuple(result.groupby("group")))
    groups = [
        _group_entry(str(name), int(size), rows_of[name].head(config.per_group))
        for name, size in group_sizes(contents.groups).items()
        if name in rows_of
    ]
    predictors = group_predictors(units, contents.groups) if config.predict else None
    context = {
        "column": contents.column,
        "level": LEVEL_PLURALS[config.level],
        "summary": summarise(result, config.max_q).sentence(config.level),
        "groups": groups,
        "words": PLAIN_WORDS,
        "max_q": f"{config.max_q:g}",
        "prediction": None if predictors is None else _prediction(predictors, config, unit_frame),
    }
    return Section("groups", f"Groups compared: {contents.column}", "comparison.html.j2", context)


def _group_entry(name: str, size: int, rows: pd.DataFrame) -> dict[str, Any]:
    table = [
        {
            "concept": row.concept,
            "in_group": f"{percent(row.prevalence)} ({row.n_documents:,})",
            "group_range": low_high,
            "elsewhere": percent(row.prevalence_rest),
            "rest_range": rest_range,
            "difference": f"{row.difference * 100:+.0f} points",
            "lift": f"{row.lift:.1f} times",
            "q": q_text(row.q_value),
            "holds": bool(row.holds),
            "verdict": verdict,
        }
        for row, low_high, rest_range, verdict in zip(
            rows.itertuples(),
            range_text(rows["prevalence_low"], rows["prevalence_high"]),
            range_text(rows["rest_low"], rows["rest_high"]),
            verdicts(rows),
            strict=True,
        )
    ]
    return {"name": name, "size": size, "rows": table, "chart": range_chart(rows)}


def _prediction(found: Predictors, config: ReportConfig, units: pd.DataFrame) -> dict[str, Any]:
    best = named_units(found.frame.groupby("group", sort=True).head(config.per_group), config.level, units)
    rows = [
        dict(group=row.group, concept=row.concept, gain=percent(row.gain), share=percent(row.share))
        for row in best.itertuples()
    ]
    return {"sentence": found.sentence(), "rows": rows}


def over_time(contents: ReportContents) -> Section | None:
    """The themes followed over the periods of a date column: what was tested, and a small chart of each theme that
    rises or falls (or changes between the first and the last period with enough documents)."""
    line, run, max_q = contents.timeline, contents.run, contents.config.max_q
    if line is None or run.themes is None or run.theme_info.empty:
        return None
    found = level_trends(run, line, "theme")
    tests = ranked_over_time(found.trends.tests, max_q)
    shares = found.trends.shares
    changing = [
        {
            "name": found.names[int(row.feature_id)],
            "verdict": row.verdict,
            "trend": f"{row.trend_change * 100:+.0f} points from the first {line.period} to the last",
            "change": row.change_verdict,
            "q": q_text(float(np.fmin(row.trend_q, row.change_q))),
            "colour": theme_colour(found.ids[int(row.feature_id)]),
            "chart": timeline_chart(
                shares[shares["feature_id"] == row.feature_id],
                line.names,
                row.trend_change if row.verdict not in (NO_CHANGE, TOO_FEW) else None,
            ),
        }
        for row in tests[tests["changes"]].itertuples()
    ]
    summary = summarise_over_time(found.trends, max_q)
    compared = found.trends.compared
    context = {
        "column": contents.date_column,
        "summary": summary.sentence("theme", "themes"),
        "too_few": summary.too_few_sentence(),
        "span": f"{len(line.periods):,} {line.period}s from {line.names[0]} to {line.names[-1]}",
        "undated": line.n_undated,
        "compared": "" if compared is None else " and ".join(line.names[p] for p in compared),
        "changing": changing,
        "steady": [found.names[int(f)] for f in tests.loc[~tests["changes"], "feature_id"]],
        "words": TREND_WORDS,
        "max_q": f"{max_q:g}",
    }
    return Section("over-time", f"Over time: {contents.date_column}", "over_time.html.j2", context)


def reliability(contents: ReportContents) -> Section:
    """How far the concepts can be trusted: the run's quality on documents kept aside, how many features came back
    in every training compared, and the labels' scores."""
    record, features = contents.run.record, contents.run.features
    captured = detail_captured(record)
    facts = [
        (
            "Detail captured on documents kept aside",
            "not measured" if captured is None else f"{quality_words(record)}: the run {detail_in_words(record)}",
        ),
        ("Features that never fire", f"{record.metrics.get('dead_fraction', math.nan):.1%}"),
        (
            "Features found in every training",
            f"{comes_back(record)}: the model was trained several times from different random starts and only the "
            "features most trainings found were kept",
        ),
    ]
    shown = features[~features["hidden"]]
    scores = shown["score_embedding"].dropna() if "score_embedding" in shown else pd.Series(dtype=float)
    if len(scores):
        facts.append(
            (
                "Label scores",
                f"{len(scores):,} labels scored, {float(scores.mean()):.2f} on average (1.0: the label picks out its "
                f"feature's documents perfectly, 0.5: no better than chance); {int((scores >= 0.75).sum()):,} at "
                "0.75 or above (a good name)",
            )
        )
    context = {"facts": facts, "warning": overfitting(record) or ""}
    return Section("reliability", "How reliable the concepts are", "reliability.html.j2", context)


def settings(contents: ReportContents) -> Section:
    """The settings and versions that produced the run, and the report's own."""
    record = contents.run.record
    about = [
        ("Run", record.run_id),
        ("Trained", record.created_at),
        ("Dataset", f"{contents.dataset.name} ({record.dataset_id})"),
        ("Embedding", record.embedding_key),
        ("Report written", f"{contents.written_at} by Prisma {__version__}"),
    ]
    groups = [(stage, _flat(values)) for stage, values in record.config.items() if isinstance(values, dict)]
    groups.append(("report", _flat(asdict(contents.config))))
    metrics = _flat({k: v for k, v in record.metrics.items() if not isinstance(v, list | dict)})
    context = {"about": about, "groups": groups, "metrics": metrics, "versions": sorted(record.versions.items())}
    return Section("settings", "Settings and versions", "settings.html.j2", context)


def _flat(values: dict[str, Any]) -> list[tuple[str, str]]:
    return [(str(name), _value(value)) for name, value in values.items()]


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return value if isinstance(value, str) else json.dumps(value, default=str)


SECTIONS: tuple[Callable[[ReportContents], Section | None], ...] = (
    collection,
    themes,
    evidence,
    document_map,
    comparison,
    over_time,
    reliability,
    settings,
)
"""The report's sections, in page order."""


def title(contents: ReportContents) -> tuple[str, str]:
    """(the report's title, the run's name in words)."""
    return f"Prisma report: {contents.dataset.name}", run_name(contents.run.record)
