"""Explore's Over time view on a run whose dataset has dates (300 BBC articles, business planted to rise and tech to
fall, tests/helpers/dated_run.py), checked against the core; a dataset without dates says so; the Datasets page asks
how dates are written when their first rows cannot tell."""

import json
import shutil
from collections.abc import Iterator

import pandas as pd
import pytest
from app_helpers import new_app, open_page, table, texts

from prisma_core import pipeline
from prisma_core.compare.prevalence import q_text
from prisma_core.pipeline.trends import level_trends
from prisma_core.store import WORKSPACE_ENV, Workspace
from prisma_core.trends.over_time import ranked, summarise
from prisma_core.trends.periods import timeline


@pytest.fixture(scope="module")
def workspace(dated_run, tmp_path_factory) -> Iterator[Workspace]:
    """A copy of the dated run's workspace as the app's workspace for this module (the app writes maps and exports
    into it)."""
    path = shutil.copytree(dated_run.path, tmp_path_factory.mktemp("over_time_app") / "workspace")
    with pytest.MonkeyPatch.context() as environment:
        environment.setenv(WORKSPACE_ENV, str(path))
        yield Workspace(path)


def over_time(dated_run):
    at = new_app(dated_run.dataset_id, dated_run.run_id)
    at.session_state["explore_tab"] = "Over time"
    return open_page(at, "explore")


def expected(workspace: Workspace, dated_run, level: str, period: str, compared=None):
    """The core's verdicts (ranked as the page shows them) at a level and period."""
    run = pipeline.load_run(workspace, dated_run.run_id)
    dates = workspace.metadata(dated_run.dataset_id)["published"]
    found = level_trends(run, timeline(dates, period), level, compared)
    return found, ranked(found.trends.tests)


def test_the_themes_over_the_suggested_months_with_their_verdicts(workspace, dated_run):
    at = over_time(dated_run)
    assert not at.exception, at.exception
    assert at.selectbox(key="trend_column").value == "published"
    assert at.selectbox(key="trend_period_published").value == "month"  # 394 dated articles over 12 months
    assert at.radio(key="trend_level").value == "theme"
    found, order = expected(workspace, dated_run, "theme", "month")
    shown = table(at, "concept", "verdict", "trend_q", "change_verdict")
    assert shown["concept"].tolist() == order["feature_id"].map(found.names).tolist()
    assert shown["verdict"].tolist() == order["verdict"].tolist()
    assert shown["trend_q"].tolist() == [q_text(q) for q in order["trend_q"]]
    assert shown["trend_change"].tolist() == pytest.approx((order["trend_change"] * 100).tolist())  # in points
    assert {"rising", "falling"} <= set(shown["verdict"])  # the planted desks
    assert summarise(found.trends).sentence("theme", "themes") in texts(at.markdown)
    assert "6 documents without a date are left out." in texts(at.caption)
    (chart,) = at.get("vega_lite_chart")
    spec = json.loads(chart.proto.spec)
    changing = order.loc[order["changes"], "feature_id"].map(found.names).tolist()
    assert spec["facet"]["sort"] == changing and len(changing) >= 2  # a small chart of each theme that changes
    (button,) = [b for b in at.get("download_button") if b.proto.id]
    assert button.label == "Every theme and period with its statistics (CSV)" and button.proto.ignore_rerun


def test_another_period_level_and_pair_of_periods_are_recomputed(workspace, dated_run):
    at = over_time(dated_run)
    at.selectbox(key="trend_period_published").select("quarter").run()
    at.radio(key="trend_level").set_value("feature").run()
    at.selectbox(key="trend_from_published_quarter").select(1).run()
    at.selectbox(key="trend_to_published_quarter").select(2).run()
    assert not at.exception, at.exception
    found, order = expected(workspace, dated_run, "feature", "quarter", (1, 2))
    shown = table(at, "concept", "verdict", "change_verdict", "from_share", "to_share")
    assert shown["concept"].tolist() == order["feature_id"].map(found.names).tolist()
    assert shown["from_share"].tolist() == pytest.approx(order["from_share"].tolist())
    assert shown["change_verdict"].tolist() == order["change_verdict"].tolist()
    assert shown["change_q"].tolist() == [q_text(q) if q == q else "" for q in order["change_q"]]


def test_the_downloads_offer_the_table_over_time_and_the_report_follows_the_dates(workspace, dated_run):
    at = over_time(dated_run)
    at.session_state["explore_tab"] = "Downloads"
    at.run()
    assert not at.exception, at.exception
    labels = [b.label for b in at.get("download_button")]
    assert "Concepts over time, every level (CSV)" in labels
    assert "the themes over time (for a dataset with dates)" in " ".join(texts(at.markdown))


def test_a_dataset_without_dates_says_how_dates_are_recognised(small_run, tmp_path, monkeypatch):
    workspace = small_run.copy(tmp_path / "workspace")
    monkeypatch.setenv(WORKSPACE_ENV, str(workspace.path))
    at = new_app(small_run.dataset_id, small_run.run.run_id)
    at.session_state["explore_tab"] = "Over time"
    open_page(at, "explore")
    assert not at.exception, at.exception
    (info,) = [text for text in texts(at.info) if "no column of dates" in text]
    assert "12/04/2007" in info and "Datasets page asks" in info


def test_the_datasets_page_asks_how_dates_are_written_when_the_first_rows_cannot_tell(workspace, bbc):
    frame = bbc.head(4)[["id", "text"]].assign(visit=["04/05/2007", "01/02/2008", "03/03/2009", "11/12/2009"])
    at = new_app()
    open_page(at, "datasets")
    at.file_uploader(key="upload").set_value(("visits.csv", frame.to_csv(index=False).encode(), "text/csv")).run()
    question = at.radio(key="date_order")
    assert question.value is None  # asked, not assumed
    assert question.options == ["Day first: 04/05/2007 is 4 May 2007", "Month first: 04/05/2007 is 5 April 2007"]
    question.set_value("day_first")
    at.text_input(key="dataset_name").input("visits")
    at.button(key="create_dataset").click().run()
    assert not at.exception, at.exception
    (dataset,) = [d for d in workspace.datasets() if d.name == "visits"]
    visits = workspace.metadata(dataset.dataset_id)["visit"]
    assert visits.tolist() == pd.to_datetime(frame["visit"], dayfirst=True).tolist()
