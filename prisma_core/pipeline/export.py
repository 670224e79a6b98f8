"""A run exported as plain files (Parquet, JSON, safetensors) for use outside Prisma."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp

from prisma_core.errors import StoreError
from prisma_core.lineage import record_stage
from prisma_core.pipeline.files import cannot_stage, outside_workspace
from prisma_core.reading.explore import spreadsheet_csv
from prisma_core.reading.runs import LoadedRun, document_themes, family_membership, load_run
from prisma_core.store import NamedFamily, Workspace
from prisma_core.store.stages import EXPORT
from prisma_core.trends.periods import date_columns

EXPORT_FILES = (
    "features.parquet",
    "activations.parquet",
    "documents.parquet",
    "families.json",
    "themes.json",
    "sae.safetensors",
    "config.json",
)
DATED_EXPORTS = ("trends.csv",)
"""Written only for a dataset with a column of dates: how common each concept is per period (`pipeline.trends`)."""
EXPORT_MARKER = ".prisma-export"
"""Written into every export folder: the files named in EXPORT_FILES there were written by an export."""


def export_run(workspace: Workspace, run_id: str | None, out_dir: str | Path) -> list[Path]:
    """Write features.parquet, activations.parquet, documents.parquet, families.json, themes.json, sae.safetensors,
    config.json; and trends.csv when the dataset has a column of dates (its first one, every level, the period its
    span suggests).

    Everything is written to a temporary folder next to `out_dir` first and moved in once complete, so a failed
    export leaves nothing half-written. Refuses a folder inside the workspace (except the app's own `exports/`)
    and never overwrites a file an earlier export did not write. Once the files are in, the export's stage record
    (the folder, the files, their size) is written, a child of the run's training record.
    """
    started = time.perf_counter()
    out = export_target(workspace, Path(out_dir))
    run = load_run(workspace, run_id)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".prisma-export-", dir=out.parent))
    except OSError as error:
        raise StoreError(cannot_stage("the export", out, error)) from error
    try:
        _write_export(workspace, run, staging)
        out.mkdir(exist_ok=True)
        (out / EXPORT_MARKER).touch()
        written = [name for name in (*EXPORT_FILES, *DATED_EXPORTS) if (staging / name).exists()]
        for name in written:
            (staging / name).replace(out / name)
        for name in set(DATED_EXPORTS) - set(written):
            (out / name).unlink(missing_ok=True)  # an earlier export's, of a run with dates
    except OSError as error:
        raise StoreError(f"Could not write the export to {out}: {error.strerror or error}.") from error
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    paths = [out / name for name in written]
    summary = {
        "path": str(out),
        "files": written,
        "bytes": sum(path.stat().st_size for path in paths),
        "seconds": time.perf_counter() - started,
    }
    record_stage(workspace, EXPORT, run.record.run_id, run.record.dataset_id, {}, summary, run.record.run_id)
    return paths


def export_target(workspace: Workspace, out: Path) -> Path:
    """The resolved export folder, once it is known to be safe to write into."""
    out = outside_workspace(workspace, out, "export to a folder outside it")
    if out.exists() and not out.is_dir():
        raise StoreError(f"{out} is a file; export to a folder.")
    if out.is_dir() and not (out / EXPORT_MARKER).exists():
        taken = [name for name in (*EXPORT_FILES, *DATED_EXPORTS) if (out / name).exists()]
        if taken:
            raise StoreError(
                f"{out} already holds {', '.join(taken)}, not written by a Prisma export; "
                "export to an empty or new folder."
            )
    return out


def _write_export(workspace: Workspace, run: LoadedRun, out: Path) -> None:
    docs = workspace.documents(run.record.dataset_id, ["position", "doc_id", "title", "metadata"])
    shown = run.features[~run.features["hidden"]]  # what the analyst hid stays out of the export
    features = shown.merge(family_membership(run.families), on="feature_id", how="left")
    feature_columns = [
        "feature_id",
        "density",
        "density_fraction",
        "mean_activation",
        "max_activation",
        "found_in",
        "background",
        "pinned",
        "label",
        "description",
        "label_source",
        "score_embedding",
        "score_detection",
        "label_note",
        "family_id",
        "parent",
        "theme_id",
        "subtheme_id",
    ]
    features[feature_columns].to_parquet(out / "features.parquet", index=False)
    _write_activations(run, docs["doc_id"].to_numpy(), shown["feature_id"].to_numpy(), out / "activations.parquet")
    metadata_frame = workspace.metadata(run.record.dataset_id)
    documents = pd.concat([docs[["doc_id", "title"]], document_themes(run), metadata_frame], axis=1)
    documents.to_parquet(out / "documents.parquet", index=False)
    if date_columns(metadata_frame):
        from prisma_core.pipeline.trends import trends_of, trends_table  # scipy.stats: not for every view's import

        (out / "trends.csv").write_text(spreadsheet_csv(trends_table(trends_of(run, metadata_frame))), encoding="utf-8")
    (out / "families.json").write_text(json.dumps(_families_for_export(run.families), indent=2))
    (out / "themes.json").write_text(json.dumps(_themes_for_export(run), indent=2))
    (out / "sae.safetensors").write_bytes((run.weights / "sae.safetensors").read_bytes())
    run_config = {
        "run_id": run.record.run_id,
        "dataset_id": run.record.dataset_id,
        "embedding_key": run.record.embedding_key,
        "created_at": run.record.created_at,
        "config": run.record.config,
        "metrics": run.record.metrics,
        "versions": run.record.versions,
        "stages": [asdict(stage) for stage in workspace.stage_records.of(run.record.dataset_id, run.record.run_id)],
    }
    (out / "config.json").write_text(json.dumps(run_config, indent=2))


EXPORT_ROWS = 65_536
"""Documents whose activations are written to activations.parquet at a time (2 million rows at k = 32)."""


def _write_activations(run: LoadedRun, doc_ids: np.ndarray, shown: np.ndarray, path: Path) -> None:
    """doc_id, feature_id, value of every activation of the `shown` features, in document order, written EXPORT_ROWS
    documents at a time: the rows of a million documents (32 million at k = 32) are never all in memory."""
    schema = pa.schema([("doc_id", pa.string()), ("feature_id", pa.int32()), ("value", pa.float32())])
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, max(run.codes.shape[0], 1), EXPORT_ROWS):
            coo = run.codes[start : start + EXPORT_ROWS].tocoo()
            keep = np.isin(coo.col, shown)
            coo = sp.coo_matrix((coo.data[keep], (coo.row[keep], coo.col[keep])), shape=coo.shape)
            columns = [doc_ids[start + coo.row].astype(str), coo.col.astype(np.int32), coo.data.astype(np.float32)]
            writer.write_table(pa.table(columns, schema=schema))


def _themes_for_export(run: LoadedRun) -> list[dict[str, Any]]:
    """The themes, each with its sub-themes (none for runs made before sub-themes existed)."""
    themes = json.loads(run.theme_info.to_json(orient="records"))
    subthemes = json.loads(run.subtheme_info.to_json(orient="records"))
    return [
        theme | {"subthemes": [sub for sub in subthemes if sub["theme_id"] == theme["theme_id"]]} for theme in themes
    ]


def _families_for_export(families: Sequence[NamedFamily]) -> list[dict[str, Any]]:
    return [
        {
            "family_id": f.family_id,
            "iteration": f.iteration,
            "label": f.label,
            "label_source": f.label_source,
            "parent": f.parent,
            "members": f.members,
            "edges": [{"parent": p, "child": c, "weight": w} for p, c, w in f.edges],
        }
        for f in families
    ]
