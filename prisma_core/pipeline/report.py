"""The door to a run's report: the self-contained HTML page (the app's download) and the file the command line
writes."""

from prisma_core.report.writer import report_html, write_report

__all__ = ["report_html", "write_report"]
