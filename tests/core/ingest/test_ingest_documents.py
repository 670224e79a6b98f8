"""What the rows of a file become: empty texts left out and listed, ids made unique, repeated texts kept,
texts kept verbatim up to the length limit, reserved column names renamed, 100,000 rows read.
"""

import io
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
from ingest_helpers import BY_COLUMN, csv_source, raises

from prisma_core.ingest import IngestConfig, read_paths, read_sources
from prisma_core.store.datasets import text_hash


def test_whitespace_and_missing_texts_are_excluded_and_listed() -> None:
    frame = pd.DataFrame({"id": ["a", "b", "c", "d", "e"], "text": ["real text", "   ", None, "\n\t", "more text"]})
    dataset = read_sources([csv_source(frame)], BY_COLUMN)
    assert dataset.documents["doc_id"].tolist() == ["a", "e"]
    assert dataset.report.empty_ids == ["b", "c", "d"]
    only_blank = pd.DataFrame({"id": ["a", "b"], "text": ["  ", None]})
    with raises("no non-empty documents"):
        read_sources([csv_source(only_blank)], BY_COLUMN)


def test_duplicated_ids_are_renamed_and_listed() -> None:
    frame = pd.DataFrame({"id": ["7", "7", "8", "7#2", "7"], "text": ["a", "b", "c", "d", "e"]})
    dataset = read_sources([csv_source(frame)], IngestConfig(text_column="text", id_column="id"))
    assert dataset.documents["doc_id"].tolist() == ["7", "7#3", "8", "7#2", "7#4"]
    assert dataset.report.renamed_ids == {"7#3": "7", "7#4": "7"}
    assert dataset.documents["doc_id"].is_unique


def test_same_file_name_twice_gets_unique_ids() -> None:
    dataset = read_sources([("a.txt", b"first"), ("a.txt", b"second")])
    assert dataset.documents["doc_id"].tolist() == ["a.txt", "a.txt#2"]
    assert dataset.report.renamed_ids == {"a.txt#2": "a.txt"}


def test_non_string_and_missing_ids() -> None:
    content = b"id,text\n101,first\n,second\n103,third\n"
    dataset = read_sources([("table.csv", content)], BY_COLUMN)
    assert dataset.documents["doc_id"].tolist() == ["101", "2", "103"]  # the missing id gets its row number
    assert dataset.documents["doc_id"].map(type).eq(str).all()
    numbers = pd.DataFrame({"id": [1.0, 2.0, np.nan], "text": ["x", "y", "z"]})
    parquet = io.BytesIO()
    numbers.to_parquet(parquet)
    from_parquet = read_sources([("n.parquet", parquet.getvalue())], BY_COLUMN)
    assert from_parquet.documents["doc_id"].tolist() == ["1", "2", "3"]
    leading_zeros = read_sources([("z.csv", b"id,text\n007,x\n008,y\n")], BY_COLUMN)
    assert leading_zeros.documents["doc_id"].tolist() == ["007", "008"]


def test_duplicate_texts_are_kept_and_listed() -> None:
    frame = pd.DataFrame({"id": ["a", "b", "c", "d"], "text": ["same", "other", "same", "same"]})
    dataset = read_sources([csv_source(frame)], BY_COLUMN)
    assert dataset.documents["doc_id"].tolist() == ["a", "b", "c", "d"]
    assert dataset.report.duplicate_text_ids == ["c", "d"]


def test_html_and_formulas_are_kept_verbatim() -> None:
    texts = ["<script>alert('x')</script><b>bold</b>", "=SUM(A1)", "+cmd|' /C calc'!A0", "@risk; -2+3"]
    frame = pd.DataFrame({"id": ["h", "f", "p", "a"], "text": texts})
    from_csv = read_sources([csv_source(frame)], BY_COLUMN)
    assert from_csv.documents["text"].tolist() == texts
    jsonl = "\n".join(json.dumps(record) for record in frame.to_dict("records")).encode()
    from_jsonl = read_sources([("x.jsonl", jsonl)], BY_COLUMN)
    assert from_jsonl.documents["text"].tolist() == texts


def test_document_length_limit(news: pd.DataFrame) -> None:
    million = ("word " * 200_000)[:1_000_000]
    dataset = read_sources([("long.txt", million.encode())])
    assert len(dataset.documents["text"].iloc[0]) == 1_000_000
    frame = pd.DataFrame({"id": ["short", "huge"], "text": ["fine", "x" * 2_000_001]})
    with raises("table.csv: document 'huge' has 2,000,001 characters; the limit is 2,000,000"):
        read_sources([csv_source(frame)], BY_COLUMN)


def test_reserved_metadata_names_are_kept_under_new_names() -> None:
    frame = pd.DataFrame(
        {"body": ["long body one", "long body two"], "text": ["t1", "t2"], "doc_id": [1, 2], "text_hash": ["h1", "h2"]}
    )
    dataset = read_sources([csv_source(frame)], IngestConfig(text_column="body"))
    assert list(dataset.documents.columns) == [
        "doc_id",
        "title",
        "text",
        "text_hash",
        "text_original",
        "doc_id_original",
        "text_hash_original",
    ]
    assert dataset.documents["text_hash"].tolist() == [text_hash("long body one"), text_hash("long body two")]
    assert dataset.documents["text_hash_original"].tolist() == ["h1", "h2"]
    assert dataset.documents["text"].tolist() == ["long body one", "long body two"]
    assert dataset.documents["doc_id_original"].tolist() == [1, 2]


def test_hundred_thousand_row_csv(tmp_path: Path, ag_news: pd.DataFrame) -> None:
    repeats = -(-100_000 // len(ag_news))
    frame = pd.concat([ag_news] * repeats, ignore_index=True).head(100_000)
    frame["id"] = [f"doc-{row}" for row in range(100_000)]
    path = tmp_path / "big.csv"
    frame.to_csv(path, index=False)
    started = time.perf_counter()
    dataset = read_paths([path], IngestConfig(text_column="text", id_column="id"))
    seconds = time.perf_counter() - started
    assert dataset.report.n_documents == 100_000
    assert dataset.documents["doc_id"].is_unique
    assert dataset.documents["text"].iloc[99_999] == frame["text"].iloc[99_999]
    assert len(dataset.report.duplicate_text_ids) == 100_000 - frame["text"].nunique()
    assert seconds < 20, f"100,000 rows took {seconds:.1f} s"
