"""Concepts over time on a real run (300 BBC articles whose business desk was planted to rise and tech to fall over
12 months, see tests/helpers/dated_run.py): the command line's `trends` table, the analyst's edits applied, the
export's trends.csv and the report's charts of the themes that change, all checked against the core."""

import io
import shutil

import pandas as pd
import pytest
from markupsafe import escape
from report_page import Page

from prisma_core.cli import main as cli_main
from prisma_core.pipeline import export_run
from prisma_core.pipeline.report.writer import report_html
from prisma_core.pipeline.trends import TABLE_COLUMNS, concept_trends, trends_table
from prisma_core.reading.explore import level_units
from prisma_core.reading.runs import document_themes, load_run
from prisma_core.store import Workspace
from prisma_core.trends import FALLING, NO_CHANGE, RISING
from prisma_core.trends.config import TrendConfig
from prisma_core.trends.over_time import summarise

MARKUP = "Markets <b>&</b> “money”"
MONTHS = [f"2004-{month:02d}" for month in range(1, 13)]
ONE_POINT = pd.DataFrame({"position": [0], "x": [0.0], "y": [0.0]})
"""The map a report is handed (its own would take a t-SNE of every document)."""


def desk_themes(workspace: Workspace, dated_run) -> dict[str, int]:
    """desk -> the theme most of its articles are in."""
    themes = document_themes(load_run(workspace, dated_run.run_id, with_edits=False))["theme_id"]
    return pd.crosstab(dated_run.frame["label"], themes.to_numpy()).idxmax(axis=1).astype(int).to_dict()


@pytest.fixture(scope="module")
def edited(dated_run, tmp_path_factory) -> tuple[Workspace, dict[str, int], int]:
    """A copy of the dated run where the analyst renamed the business theme (with markup in its name) and hid a
    feature: (workspace, desk -> theme, the hidden feature)."""
    workspace = Workspace(shutil.copytree(dated_run.path, tmp_path_factory.mktemp("trends") / "workspace"))
    desks = desk_themes(workspace, dated_run)
    edit = ["edit", "--workspace", str(workspace.path), "--run", dated_run.run_id]
    assert cli_main([*edit, "--action", "rename", "--id", str(desks["business"]), "--name", MARKUP]) == 0
    hidden = int(load_run(workspace, dated_run.run_id).features["feature_id"].iloc[0])
    assert cli_main([*edit, "--action", "hide", "--level", "feature", "--id", str(hidden)]) == 0
    return workspace, desks, hidden


@pytest.fixture(scope="module")
def written(edited, dated_run, tmp_path_factory) -> tuple[pd.DataFrame, str]:
    workspace, _, _ = edited
    out = tmp_path_factory.mktemp("out") / "trends.csv"
    with pytest.MonkeyPatch.context() as patch:
        printed = io.StringIO()
        patch.setattr("sys.stdout", printed)
        assert cli_main(["trends", "--workspace", str(workspace.path), "--column", "published", "--out", str(out)]) == 0
    return pd.read_csv(out, keep_default_na=False, na_values=[""]), printed.getvalue()


def test_the_command_line_writes_a_row_per_concept_and_period_counted_from_the_documents(written, edited, dated_run):
    table, printed = written
    workspace, _, _ = edited
    assert list(table.columns) == list(TABLE_COLUMNS)
    assert set(table["level"]) == {"theme", "subtheme", "family", "feature"}
    run = load_run(workspace, dated_run.run_id)
    themes, units = level_units(run, "theme")
    rows = table[table["level"] == "theme"]
    assert len(rows) == len(units) * 12 and rows["period"].tolist()[:12] == MONTHS
    months = dated_run.dates.dt.strftime("%Y-%m")
    present = pd.DataFrame(themes.toarray() > 0)
    for column, unit in enumerate(units["unit"]):
        counted = present[column].groupby(months).agg(["size", "sum"])  # undated articles drop out of the groups
        theirs = rows[rows["concept_id"] == unit].set_index("period")
        assert theirs["documents_in_period"].tolist() == counted["size"].tolist()
        assert theirs["documents_with_concept"].tolist() == counted["sum"].tolist()
        assert theirs["share"].to_numpy() == pytest.approx((counted["sum"] / counted["size"]).to_numpy())
        assert (theirs["share_low"] <= theirs["share"]).all() and (theirs["share"] <= theirs["share_high"]).all()
    assert "6 documents without a date left out" in printed and "12 months from 2004-01 to 2004-12" in printed
    assert (rows["compared"] == "2004-01 to 2004-12").all() and not rows["too_few_documents"].any()


def test_the_planted_desks_rise_and_fall_and_the_others_do_not(written, edited):
    table, printed = written
    _, desks, _ = edited
    verdicts = table[table["level"] == "theme"].groupby("concept_id")[["verdict", "trend_q", "trend_change"]].first()
    assert verdicts.at[desks["business"], "verdict"] == RISING and verdicts.at[desks["tech"], "verdict"] == FALLING
    assert verdicts.at[desks["business"], "trend_q"] < 0.05 and verdicts.at[desks["business"], "trend_change"] > 0.1
    flat = [desks[desk] for desk in ("entertainment", "politics", "sport")]
    assert (verdicts.loc[flat, "verdict"] == NO_CHANGE).all()
    assert f"{MARKUP}: rising" in printed  # the analyst's name for it


def test_the_analysts_edits_are_applied(written, edited, dated_run):
    table, _ = written
    workspace, desks, hidden = edited
    themes = table[table["level"] == "theme"]
    assert themes.loc[themes["concept_id"] == desks["business"], "concept"].unique().tolist() == [
        f"Theme {desks['business']}: {MARKUP}"
    ]
    features = table[table["level"] == "feature"]
    assert hidden not in set(features["concept_id"])
    assert len(features) == 12 * int((~load_run(workspace, dated_run.run_id).features["hidden"]).sum())


def test_the_table_is_the_pipelines_for_any_period_and_pair_of_periods(edited, dated_run, tmp_path):
    workspace, _, _ = edited
    out = tmp_path / "quarters.csv"
    args = ["trends", "--workspace", str(workspace.path), "--level", "theme", "--period", "quarter"]
    assert cli_main([*args, "--compare-from", "2004-02", "--compare-to", "2004Q3", "--out", str(out)]) == 0
    table = pd.read_csv(out)
    config = TrendConfig(level="theme", period="quarter", compare_from="2004-02", compare_to="2004Q3")
    expected = trends_table(concept_trends(workspace, load_run(workspace, dated_run.run_id), config))
    assert table["period"].unique().tolist() == ["2004Q1", "2004Q2", "2004Q3", "2004Q4"]
    assert (table["compared"] == "2004Q1 to 2004Q3").all()
    assert table["share"].to_numpy() == pytest.approx(expected["share"].to_numpy())
    assert table["verdict"].tolist() == expected["verdict"].tolist()
    assert table["change_q"].to_numpy() == pytest.approx(expected["change_q"].to_numpy(), nan_ok=True)


def test_what_the_command_refuses_says_why(edited, tmp_path, capsys):
    workspace, _, _ = edited
    base = ["trends", "--workspace", str(workspace.path), "--out", str(tmp_path / "t.csv")]
    assert cli_main([*base, "--column", "label"]) == 2
    assert "no column of dates named “label” (its date columns: published)" in capsys.readouterr().err
    assert cli_main([*base, "--compare-from", "2010-01"]) == 2
    assert "2010-01 is outside the dates (2004-01 to 2004-12)" in capsys.readouterr().err
    assert cli_main([*base[:-1], str(workspace.path / "t.csv")]) == 2
    assert "inside the workspace" in capsys.readouterr().err
    assert not (tmp_path / "t.csv").exists()


def test_the_export_holds_the_table_over_time_only_for_a_dataset_with_dates(edited, dated_run, small_run, tmp_path):
    workspace, _, _ = edited
    paths = export_run(workspace, dated_run.run_id, tmp_path / "dated")
    assert tmp_path / "dated" / "trends.csv" in paths
    exported = pd.read_csv(tmp_path / "dated" / "trends.csv")
    expected = trends_table(concept_trends(workspace, load_run(workspace, dated_run.run_id)))
    assert exported["concept"].tolist() == expected["concept"].tolist()
    assert exported["share"].to_numpy() == pytest.approx(expected["share"].to_numpy(), nan_ok=True)
    undated = export_run(Workspace(small_run.path), None, tmp_path / "dated")  # the same folder, an undated run
    assert all(path.name != "trends.csv" for path in undated) and not (tmp_path / "dated" / "trends.csv").exists()


def test_the_report_draws_each_theme_that_changes_with_its_name_escaped(edited, dated_run):
    workspace, desks, _ = edited
    run = load_run(workspace, dated_run.run_id)
    page = report_html(workspace, run, map_points=ONE_POINT)
    parsed = Page(page)
    text = parsed.reads()
    found = concept_trends(workspace, run, TrendConfig(level="theme")).levels[0]
    assert "Over time: published" in text and summarise(found.trends).sentence("theme", "themes") in text
    charts = [a for a in parsed.named("svg") if a.get("aria-label", "").startswith("Share of each period")]
    changing = int(found.trends.tests.pipe(lambda t: (t["trend_q"] < 0.05) | (t["change_q"] < 0.05)).sum())
    assert len(charts) == changing >= 2
    assert MARKUP not in page and str(escape(f"Theme {desks['business']}: {MARKUP}")) in page
    assert f"Theme {desks['business']}: {MARKUP} Rising : +" in text  # the verdict in bold, then its change
    assert "6 documents without a date left out" in text
    points = [a for a in parsed.named("circle") if a.get("stroke-width") == "1.5"]
    assert len(points) == 12 * changing  # a point a month, none hollow (every month has 10 articles or more)
    assert all(a["fill"] != "#fff" for a in points)


def test_a_report_of_a_dataset_without_dates_has_no_section_over_time(small_run):
    workspace = Workspace(small_run.path)
    page = report_html(
        workspace, load_run(workspace), map_points=pd.DataFrame({"position": [0], "x": [0.0], "y": [0.0]})
    )
    assert "Over time" not in Page(page).reads()
