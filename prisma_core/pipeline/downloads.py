"""What the app offers for download from a run: the run exported into the workspace's own exports/ folder, and
its feature table (features.parquet: labels, scores, families, themes) as a CSV a spreadsheet opens as data."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from prisma_core.pipeline import APP_EXPORTS, export_run
from prisma_core.reading.explore import spreadsheet_csv
from prisma_core.store import Workspace


def export_in_workspace(workspace: Workspace, run_id: str) -> Path:
    """Exports the run into `exports/<run id>` inside the workspace (the one place there an export may go) and
    returns that folder."""
    return export_run(workspace, run_id, workspace.path / APP_EXPORTS / run_id)[0].parent


def features_csv(export_folder: Path) -> str:
    """The export's features.parquet as CSV: the same columns, one row per feature."""
    return spreadsheet_csv(pd.read_parquet(export_folder / "features.parquet"))
