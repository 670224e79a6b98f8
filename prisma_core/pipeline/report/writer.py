"""Renders the report into one HTML file and writes it (the command line's `report`) or hands it over (the app's
download); either leaves the report's stage record."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

import pandas as pd
from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from prisma_core import __version__
from prisma_core.lineage import record_stage
from prisma_core.names import isolated
from prisma_core.pipeline.files import file_target, write_whole
from prisma_core.pipeline.report.config import ReportConfig
from prisma_core.pipeline.report.contents import gather
from prisma_core.pipeline.report.sections import SECTIONS, title
from prisma_core.reading.runs import LoadedRun
from prisma_core.store import Workspace
from prisma_core.store.stages import REPORT


def _as_text(value: object) -> object:
    """Every text the page shows, isolated (`names.isolated`); the HTML the templates make is left as it is."""
    return isolated(value) if isinstance(value, str) and not isinstance(value, Markup) else value


_TEMPLATES = Environment(
    loader=PackageLoader("prisma_core.pipeline.report", "templates"),
    autoescape=True,  # every value is text: documents, labels, names and numbers alike
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    finalize=_as_text,
)


def report_html(
    workspace: Workspace, run: LoadedRun, config: ReportConfig = ReportConfig(), map_points: pd.DataFrame | None = None
) -> str:
    """The report of a run, as one self-contained HTML page. map_points: the map of the documents when the caller
    has it (position, x, y), else it is drawn here."""
    contents = gather(workspace, run, config, map_points)
    sections = [section for make in SECTIONS if (section := make(contents)) is not None]
    heading, run_words = title(contents)
    return _TEMPLATES.get_template("page.html.j2").render(
        title=heading, run_name=run_words, sections=sections, version=__version__, written_at=contents.written_at
    )


def write_report(workspace: Workspace, run: LoadedRun, out: str | Path, config: ReportConfig = ReportConfig()) -> Path:
    """Writes the report to `out` (a file; written whole or not at all), then its stage record (its settings, the
    file and its size), and returns its resolved path."""
    started = time.perf_counter()
    target = report_target(workspace, Path(out))
    path = write_whole(target, report_html(workspace, run, config), "the report")
    _record_report(workspace, run, config, {"path": str(path), "bytes": path.stat().st_size}, started)
    return path


def downloaded_report(
    workspace: Workspace, run: LoadedRun, config: ReportConfig, map_points: pd.DataFrame | None = None
) -> str:
    """The report the app downloads (`report_html`), once its stage record (its settings and its size) is written."""
    started = time.perf_counter()
    page = report_html(workspace, run, config, map_points)
    _record_report(workspace, run, config, {"bytes": len(page.encode())}, started)
    return page


def _record_report(
    workspace: Workspace, run: LoadedRun, config: ReportConfig, wrote: dict[str, object], started: float
) -> None:
    """The report's stage record: a child of the run's training record."""
    summary = wrote | {"seconds": time.perf_counter() - started}
    run_id, dataset_id = run.record.run_id, run.record.dataset_id
    record_stage(workspace, REPORT, run_id, dataset_id, asdict(config), summary, run_id)


def report_target(workspace: Workspace, out: Path) -> Path:
    """The resolved file to write, once it is known to be safe: not a folder, not inside the workspace (except
    the app's own exports folder)."""
    return file_target(workspace, out, "report", "report.html")
