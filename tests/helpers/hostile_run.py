"""A trained run whose every text a user supplies is hostile (markup, scripts, links, spreadsheet formulas): the
dataset name, document ids, titles and texts, a metadata column's values, and the feature, family and theme labels.
The app's safety tests and the report's browser test read it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
from reliability_helpers import SMALL_SAE, bbc_subset

from prisma_core import pipeline
from prisma_core.ingest import IngestConfig
from prisma_core.store import Workspace

HOSTILE = [
    "<script>alert('xss')</script>",
    '<img src=x onerror="alert(1)">',
    "[click me](javascript:alert(1))",
    "<iframe src=javascript:alert(2)></iframe>",
    '=HYPERLINK("http://evil.example","x") **bold** # heading',
]
HOSTILE_DESK = "tech"
"""The BBC desk whose value in the `label` column is replaced by HOSTILE[1]."""


def build_hostile_workspace(folder: Path, bbc: pd.DataFrame) -> Path:
    frame = bbc_subset(bbc, 8)
    for row in range(0, len(frame), 4):
        markup = HOSTILE[row % len(HOSTILE)]
        frame.loc[row, "title"] = markup
        frame.loc[row, "text"] = f"{frame.loc[row, 'text']} {markup}"
    frame.loc[:2, "id"] = [f"{markup} {row}" for row, markup in enumerate(HOSTILE[:3])]
    frame.loc[frame["label"] == HOSTILE_DESK, "label"] = HOSTILE[1]
    workspace = Workspace(folder)
    upload = [("hostile.csv", frame.to_csv(index=False).encode())]
    dataset = pipeline.NewDataset(upload, f"{HOSTILE[0]} news", IngestConfig(id_column="id"))
    run_id = pipeline.ingest_embed_train(workspace, dataset, sae_config=SMALL_SAE).run_id
    labels = [
        {
            "feature_id": feature,
            "label": f"{HOSTILE[feature % 2]} {HOSTILE[2]} f{feature}",
            "description": f"{HOSTILE[3]} {HOSTILE[4]}",
            "source": "llm-with-ideas",  # a non-keyword label is the one shown
        }
        for feature in range(384)
    ]
    workspace.labels.add(run_id, labels)
    workspace.groups.save_families(
        run_id, [replace(family, label=HOSTILE[1]) for family in workspace.groups.families(run_id)]
    )
    themes = workspace.groups.themes(run_id)
    workspace.groups.save_themes(run_id, [theme | {"label": f"{HOSTILE[0]} {theme['theme_id']}"} for theme in themes])
    return workspace.path
