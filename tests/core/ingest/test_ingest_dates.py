"""Dates understood at ingest: ISO text, day/month/year with the order read from the values or asked when they cannot
tell, year first, Excel day numbers and Unix times in columns named like dates; stored and read back as dates, over
files read in batches too. Counts, prices and years are never taken for dates."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from prisma_core import pipeline
from prisma_core.ingest import IngestConfig, read_paths
from prisma_core.ingest.dates import DateEvidence, ambiguous_date_columns, to_dates
from prisma_core.store import Workspace

DATES = pd.to_datetime(["2007-04-12", "2008-12-25", "2009-01-05", "2010-07-31"])


@pytest.fixture
def table(news: pd.DataFrame) -> pd.DataFrame:
    """4 BBC articles with dates in every way the ingest reads them, and numbers that are not dates."""
    frame = news.head(4)[["id", "text"]].copy()
    frame["day_first"] = DATES.strftime("%d/%m/%Y")
    frame["month_first"] = DATES.strftime("%m-%d-%y")
    frame["year_first"] = DATES.strftime("%Y/%m/%d")
    frame["iso"] = DATES.strftime("%Y-%m-%dT%H:%M:%S")
    frame["excel_date"] = ((DATES - pd.Timestamp("1899-12-30")).days).astype(int)
    frame["created_unix"] = (DATES - pd.Timestamp("1970-01-01")) // pd.Timedelta(seconds=1)
    frame["updated_ms"] = (DATES - pd.Timestamp("1970-01-01")) // pd.Timedelta(milliseconds=1)
    frame["count"] = [39184, 40000, 41000, 42000]  # Excel-like numbers, but not named like a date
    frame["days"] = [3, 12, 25, 31]  # named like a date, but too small to be one
    frame["year"] = [2007, 2008, 2009, 2010]
    return frame


def test_every_way_of_writing_dates_is_read_as_dates(tmp_path: Path, table: pd.DataFrame) -> None:
    path = tmp_path / "dated.csv"
    table.to_csv(path, index=False)
    dataset = read_paths([path], IngestConfig(text_column="text", id_column="id"))
    docs = dataset.documents
    for column in ("day_first", "month_first", "year_first", "iso", "excel_date", "created_unix", "updated_ms"):
        assert pd.api.types.is_datetime64_any_dtype(docs[column]), column
        assert docs[column].dt.normalize().tolist() == DATES.tolist(), column
    for column in ("count", "days", "year"):
        assert docs[column].tolist() == table[column].tolist(), column
    warnings = " ".join(dataset.report.warnings)
    assert "column 'day_first' read as dates written day first" in warnings
    assert "column 'excel_date' read as Excel day numbers" in warnings
    assert "'iso'" not in warnings  # ISO dates need no checking


def test_dates_that_could_be_either_order_are_asked_about(tmp_path: Path, news: pd.DataFrame) -> None:
    frame = news.head(3)[["id", "text"]].assign(visit=["04/05/2007", "01/02/2008", "11/12/2009"])
    path = tmp_path / "visits.csv"
    frame.to_csv(path, index=False)
    assert ambiguous_date_columns(frame) == ["visit"]
    unsure = read_paths([path], IngestConfig(text_column="text", id_column="id"))
    assert unsure.documents["visit"].tolist() == frame["visit"].tolist()  # kept as text
    assert any(
        "'visit' holds dates that could be written day first or month first" in w for w in unsure.report.warnings
    )
    for order, first in (("day_first", "2007-05-04"), ("month_first", "2007-04-05")):
        read = read_paths([path], IngestConfig(text_column="text", id_column="id", date_order=order)).documents
        assert read["visit"].iloc[0] == pd.Timestamp(first)
    same_either_way = frame.assign(visit=["04/04/2007", "01/01/2008", None])
    assert ambiguous_date_columns(same_either_way) == []


def test_the_order_is_read_from_every_batch_and_contradictions_stay_text(tmp_path: Path, news: pd.DataFrame) -> None:
    """Read 2 rows at a time: the first batches cannot tell, a later one shows the day first, so every row is read
    day first; where a later batch contradicts an earlier one (a month above 12 each way), the column stays text."""
    frame = news.head(6)[["id", "text"]].assign(
        settled=["04/05/2007", "01/02/2008", "03/03/2009", "02/01/2010", "25/12/2010", None],
        contradicted=["25/12/2007", "01/02/2008", "03/03/2009", "02/01/2010", "12/25/2010", "01/01/2011"],
    )
    path = tmp_path / "batches.csv"
    frame.to_csv(path, index=False)
    docs = read_paths([path], IngestConfig(text_column="text", id_column="id", batch_rows=2)).documents
    assert docs["settled"].iloc[:5].tolist() == pd.to_datetime(frame["settled"].iloc[:5], dayfirst=True).tolist()
    assert pd.isna(docs["settled"].iloc[5])
    assert docs["contradicted"].tolist() == frame["contradicted"].tolist()


def test_impossible_dates_and_mixed_time_zones_stay_text() -> None:
    for values in (["31/02/2007", "01/01/2008"], ["13/13/2007"], ["2007-04-12T10:00:00+02:00", "2007-04-12"]):
        evidence = DateEvidence("when")
        evidence.add(pd.Series(values))
        assert evidence.reading("day_first") is None, values
    evidence = DateEvidence("when")
    evidence.add(pd.Series(["2007-04-12T10:00:00+02:00", "2007-04-13T10:00:00+02:00"]))
    assert evidence.reading("auto") == "iso"
    assert to_dates(pd.Series(["01/02/68", "01/02/69"]), "day_first").dt.year.tolist() == [2068, 1969]


def test_dates_are_stored_and_read_back_as_dates(tmp_path: Path, table: pd.DataFrame) -> None:
    path = tmp_path / "dated.csv"
    table.assign(day_first=table["day_first"].where(table.index != 1, None)).to_csv(path, index=False)
    workspace = Workspace(tmp_path / "workspace")
    dataset_id, _ = pipeline.ingest(workspace, [path], "dated", IngestConfig(text_column="text", id_column="id"))
    metadata = workspace.metadata(dataset_id)
    assert pd.api.types.is_datetime64_any_dtype(metadata["day_first"])
    assert pd.isna(metadata["day_first"].iloc[1]) and metadata["day_first"].iloc[0] == DATES[0]
    assert metadata["iso"].tolist() == DATES.tolist()
    assert metadata["count"].tolist() == table["count"].tolist()
    assert not pd.api.types.is_datetime64_any_dtype(metadata["year"])
    zoned = table.head(2)[["id", "text"]].assign(sent=["2024-03-01T09:00:00+01:00", "2024-03-02T18:30:00+01:00"])
    zoned.to_csv(tmp_path / "zoned.csv", index=False)
    zoned_id, _ = pipeline.ingest(workspace, [tmp_path / "zoned.csv"], "zoned", IngestConfig(text_column="text"))
    sent = workspace.metadata(zoned_id)["sent"]
    assert str(sent.dt.tz) == "UTC+01:00" and sent.dt.hour.tolist() == [9, 18]


def test_excel_cells_holding_dates_stay_dates(tmp_path: Path, table: pd.DataFrame) -> None:
    path = tmp_path / "dated.xlsx"
    table[["id", "text"]].assign(visit=DATES, score=np.arange(4) + 0.5).to_excel(path, index=False)
    docs = read_paths([path], IngestConfig(text_column="text", id_column="id")).documents
    assert docs["visit"].tolist() == DATES.tolist() and docs["score"].tolist() == [0.5, 1.5, 2.5, 3.5]
