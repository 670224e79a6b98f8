"""The bad-input catalogue, through `pipeline.ingest` (what the app's uploader and the CLI call) into a workspace.

tests/core/ingest/ checks the readers themselves (every format, every refusal, at the level of `read_sources`).
Here each bad input goes all the way to the store: a refused upload must give a specific message and commit
nothing (every table keeps its version), and an accepted one must be stored exactly as reported.
The app's uploader gets the same catalogue in test_reliability_uploader.py (AppTest, as an analyst would upload).
"""

import codecs
import io
import math
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from bad_inputs import ARTICLE, csv, encrypted_pdf, zip_bomb
from document_files import zip_of
from reliability_helpers import BY_ID, REPO, SMALL_SAE, bbc_subset, snapshot

from prisma_core import pipeline
from prisma_core.embed import DEFAULT_MODEL, load_model, plan_chunks
from prisma_core.errors import IngestError, TrainingError
from prisma_core.ingest import IngestConfig, Source
from prisma_core.sae import SAEConfig
from prisma_core.store import Workspace

GOOD_CSV = csv(f"id,text\n1,{ARTICLE}\n2,Another real sentence about football results.\n")
SMALL_LIMITS = IngestConfig(max_file_bytes=2_000, max_total_bytes=3_000)

# (case, the upload, the settings, the message expected); each is refused whole.
REFUSED: list[tuple[str, Callable[[], list[Source]], IngestConfig, str]] = [
    ("no files", lambda: [], IngestConfig(), "no files were given"),
    ("empty file", lambda: [("empty.csv", b"")], IngestConfig(), "empty.csv: the file is empty (0 bytes)"),
    (
        "whitespace-only documents",
        lambda: [csv("id,text\n1,   \n2,\t\n3,\n")],
        BY_ID,
        "table.csv: no non-empty documents were found",
    ),
    (
        "no text-like column",
        lambda: [csv("year,value,code\n2001,1.5,12\n2002,2.5,34\n")],
        IngestConfig(),
        "table.csv: no text-like column; the columns are: year, value, code",
    ),
    ("0-byte PDF", lambda: [("scan.pdf", b"")], IngestConfig(), "scan.pdf: the file is empty (0 bytes)"),
    (
        "encrypted PDF",
        lambda: [("locked.pdf", encrypted_pdf())],
        IngestConfig(),
        "locked.pdf: the PDF is password-protected (encrypted); remove the password and upload again",
    ),
    (
        "PDF that is not a PDF",
        lambda: [("fake.pdf", b"%PDF-1.4 truncated")],
        IngestConfig(),
        "fake.pdf: is not a readable PDF",
    ),
    (
        "DOCX that is a zip of something else",
        lambda: [("letter.docx", zip_of({"readme.txt": b"not a word document"}))],
        IngestConfig(),
        "letter.docx: is not a valid Word .docx file",
    ),
    (
        "binary garbage named .csv",
        lambda: [("data.csv", random.Random(0).randbytes(4096))],
        IngestConfig(),
        "data.csv: does not look like a text table (binary content); save it as UTF-8 text",
    ),
    (
        "UTF-16 mark on bytes that are not UTF-16",
        lambda: [("notes.csv", codecs.BOM_UTF16_LE + b"\x00\xd8a")],
        IngestConfig(),
        "notes.csv: starts with a UTF-16 mark but is not valid UTF-16 text",
    ),
    (
        "zip with ../ paths",
        lambda: [("upload.zip", zip_of({"fine.txt": b"harmless text", "../../evil.txt": b"payload"}))],
        IngestConfig(),
        "upload.zip: refused, it holds unsafe paths (../../evil.txt)",
    ),
    (
        "zip with absolute paths",
        lambda: [("upload.zip", zip_of({"/etc/cron.d/evil.txt": b"payload"}))],
        IngestConfig(),
        "upload.zip: refused, it holds unsafe paths (/etc/cron.d/evil.txt)",
    ),
    (
        "zip bomb",
        lambda: [("bomb.zip", zip_bomb(40))],
        IngestConfig(max_total_bytes=20 * 2**20),
        "bomb.zip: unpacks to more than 20,971,520 bytes, the limit (refused: too large, or a zip bomb)",
    ),
    (
        "zip inside a zip",
        lambda: [("outer.zip", zip_of({"inner.zip": zip_of({"a.txt": b"inner text"})}))],
        IngestConfig(),
        "outer.zip: zips inside a zip are not supported (inner.zip)",
    ),
    (
        "zip holding a damaged file",
        lambda: [("bundle.zip", zip_of({"a.txt": b"fine text", "b.pdf": b"not a pdf at all"}))],
        IngestConfig(),
        "b.pdf: is not a readable PDF",
    ),
    (
        "one bad file among good ones",
        lambda: [GOOD_CSV, ("locked.pdf", encrypted_pdf()), ("notes.txt", ARTICLE.encode())],
        BY_ID,
        "locked.pdf: the PDF is password-protected",
    ),
    (
        "document over the length limit",
        lambda: [csv(f"id,text\nshort,fine\nhuge,{'x' * 2_000_001}\n")],
        BY_ID,
        "table.csv: document 'huge' has 2,000,001 characters; the limit is 2,000,000 (split it into smaller documents)",
    ),
    (
        "file over the upload size limit",
        lambda: [("big.txt", b"word " * 500)],
        SMALL_LIMITS,
        "big.txt: 2,500 bytes is more than the 2,000-byte limit per file",
    ),
    (
        "files over the total size limit",
        lambda: [("a.txt", b"word " * 320), ("b.txt", b"word " * 320)],
        SMALL_LIMITS,
        "the files add up to 3,200 bytes, more than the 3,000-byte limit",
    ),
    (
        "unsupported file type",
        lambda: [("setup.exe", b"MZ\x90\x00")],
        IngestConfig(),
        "setup.exe: unsupported file type; supported: .csv, .tsv",
    ),
    (
        "named text column missing",
        lambda: [GOOD_CSV],
        IngestConfig(text_column="body"),
        "table.csv: no column named 'body'; the columns are: id, text",
    ),
]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory, bbc: pd.DataFrame) -> Workspace:
    """A workspace that already holds a dataset, which every refused upload must leave untouched."""
    workspace = Workspace(tmp_path_factory.mktemp("inputs"))
    path = tmp_path_factory.mktemp("corpus") / "bbc.parquet"
    bbc_subset(bbc, 4).to_parquet(path)
    pipeline.ingest(workspace, [path], "existing", BY_ID)
    return workspace


@pytest.mark.parametrize(("case", "upload", "config", "message"), REFUSED, ids=[case for case, *_ in REFUSED])
def test_refused_upload_names_the_problem_and_stores_nothing(workspace, case, upload, config, message) -> None:
    before = snapshot(workspace)
    existing = workspace.documents(workspace.datasets()[0].dataset_id)
    with pytest.raises(IngestError) as refused:
        pipeline.ingest(workspace, upload(), "upload", config)
    assert message in str(refused.value)
    assert snapshot(workspace) == before
    assert [dataset.name for dataset in workspace.datasets()] == ["existing"]
    pd.testing.assert_frame_equal(workspace.documents(workspace.datasets()[0].dataset_id), existing)


# -- accepted inputs are stored exactly as reported -------------------------------------------------------------


def stored(workspace: Workspace, upload: list[Source], config: IngestConfig = BY_ID) -> tuple[pd.DataFrame, dict]:
    dataset_id, _ = pipeline.ingest(workspace, upload, "accepted", config)
    record = workspace.dataset(dataset_id)
    documents = workspace.documents(dataset_id)
    workspace.delete_dataset(dataset_id)
    return documents, record.report


def test_a_single_document_is_stored(workspace) -> None:
    documents, report = stored(workspace, [("memo.txt", ARTICLE.encode())])
    assert documents[["doc_id", "title", "text"]].to_dict("records") == [
        {"doc_id": "memo.txt", "title": "memo", "text": ARTICLE}
    ]
    assert report["n_documents"] == 1


def test_whitespace_and_nan_texts_are_left_out_and_listed(workspace) -> None:
    frame = pd.DataFrame({"id": ["a", "b", "c", "d", "e"], "text": [ARTICLE, "   ", np.nan, "\n\t", "Second text."]})
    parquet = io.BytesIO()
    frame.to_parquet(parquet)
    for upload in ([("t.csv", frame.to_csv(index=False).encode())], [("t.parquet", parquet.getvalue())]):
        documents, report = stored(workspace, upload)
        assert documents["doc_id"].tolist() == ["a", "e"]
        assert documents["text"].tolist() == [ARTICLE, "Second text."]
        assert report["empty_ids"] == ["b", "c", "d"]


@pytest.mark.parametrize(
    ("encoding", "warning"),
    [("latin-1", "notes.csv: not UTF-8, decoded as cp1252"), ("utf-16", None), ("utf-8-sig", None)],
)
def test_other_encodings_are_decoded(workspace, encoding: str, warning: str | None) -> None:
    texts = ["Café crème à Zürich: £5", "naïve façade; déjà vu"]
    upload = [csv(f"id,text\n1,{texts[0]}\n2,{texts[1]}\n", "notes.csv", encoding)]
    documents, report = stored(workspace, upload)
    assert documents["text"].tolist() == texts
    assert report["warnings"] == ([warning] if warning else [])


def test_duplicated_ids_are_renamed_and_listed(workspace) -> None:
    documents, report = stored(workspace, [csv("id,text\n7,first\n7,second\n8,third\n7,fourth\n")])
    assert documents["doc_id"].tolist() == ["7", "7#2", "8", "7#3"]
    assert documents["text"].tolist() == ["first", "second", "third", "fourth"]
    assert report["renamed_ids"] == {"7#2": "7", "7#3": "7"}


def test_non_string_ids_are_stored_as_text(workspace) -> None:
    frame = pd.DataFrame({"id": [1.0, 2.0, np.nan, 1e6], "text": ["one", "two", "three", "four"]})
    parquet = io.BytesIO()
    frame.to_parquet(parquet)
    documents, _ = stored(workspace, [("n.parquet", parquet.getvalue())])
    assert documents["doc_id"].tolist() == ["1", "2", "3", "1000000"]  # a missing id gets its row number
    records = [{"id": 5, "text": "int id"}, {"id": True, "text": "bool id"}, {"id": [1, 2], "text": "list id"}]
    documents, _ = stored(workspace, [("r.json", pd.Series(records).to_json(orient="values").encode())])
    assert documents["doc_id"].tolist() == ["5", "True", "[1, 2]"]


def test_formulas_and_markup_are_kept_verbatim(workspace) -> None:
    texts = [
        "<script>alert('x')</script><b>bold</b>",
        '<img src=x onerror="alert(1)">',
        '=HYPERLINK("http://evil", "click")',
        "+cmd|' /C calc'!A0",
        "@SUM(A1:A9) -2+3",
        "[link](javascript:alert(1)) **bold** # heading",
    ]
    frame = pd.DataFrame({"id": [f"t{i}" for i in range(len(texts))], "text": texts, "title": texts})
    documents, _ = stored(workspace, [("x.csv", frame.to_csv(index=False).encode())])
    assert documents["text"].tolist() == texts
    assert documents["title"].tolist() == texts


def test_a_million_character_document_is_stored_whole_and_planned_in_windows(workspace, bbc: pd.DataFrame) -> None:
    text = " ".join(bbc["text"])[:1_000_000]
    documents, report = stored(workspace, [("book.txt", text.encode())])
    assert len(documents["text"].iloc[0]) == 1_000_000 and documents["text"].iloc[0] == text
    assert report["n_documents"] == 1

    encoder = load_model(DEFAULT_MODEL, "cpu", "fp32")
    chunking = plan_chunks(encoder, [text])  # what embedding it would do; the encoding itself is tested elsewhere
    n_tokens = len(encoder.tokenizer(text, add_special_tokens=False)["input_ids"])
    assert n_tokens > 150_000
    assert chunking.tokens_per_doc.tolist() == [n_tokens]  # every token is embedded
    assert chunking.chunks_per_doc.tolist() == [math.ceil(n_tokens / chunking.window)]
    assert max(len(ids) for ids in chunking.chunk_ids) == chunking.window + 2
    assert all(
        ids[0] == encoder.tokenizer.cls_token_id and ids[-1] == encoder.tokenizer.sep_token_id
        for ids in chunking.chunk_ids
    )


# -- too few documents for the SAE ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n_documents", "config", "message"),
    [
        (
            1,
            SMALL_SAE,
            "1 documents leave 0 for training after holding out 1; an SAE needs at least 20. "
            "Add documents or lower the holdout fraction.",
        ),
        (12, SAEConfig(), "12 documents leave 11 for training"),
        (
            25,
            SAEConfig(n_features=384, k=384),
            "k=384 active features per document must be fewer than the 384 features. Lower k or raise the number "
            "of features.",
        ),
    ],
    ids=["single document", "fewer than needed", "k too large for the features"],
)
def test_training_on_too_few_documents_says_what_to_change(workspace, bbc, n_documents, config, message) -> None:
    frame = bbc.drop_duplicates("text").head(n_documents)
    dataset_id, _ = pipeline.ingest(workspace, [("few.csv", frame.to_csv(index=False).encode())], "few", BY_ID)
    pipeline.embed_dataset(workspace, dataset_id)
    before = snapshot(workspace)
    with pytest.raises(TrainingError) as refused:
        pipeline.train_run(workspace, dataset_id, config)
    assert message in str(refused.value)
    assert snapshot(workspace) == before  # no run record, no rows, no run folder
    workspace.delete_dataset(dataset_id)


# -- a big table in bounded memory ------------------------------------------------------------------------------

MEASURE = """
import sys
from prisma_core import pipeline
from prisma_core.ingest import IngestConfig
from prisma_core.store import Workspace

def status(field):
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(field)) / 1024

before = status("VmRSS:")
dataset_id, _ = pipeline.ingest(Workspace(sys.argv[1]), [sys.argv[2]], "big", IngestConfig(text_column="text"))
print(status("VmHWM:") - before)
"""


def test_hundred_thousand_row_csv_is_stored_in_bounded_memory(tmp_path: Path, ag_news: pd.DataFrame) -> None:
    repeats = -(-100_000 // len(ag_news))
    frame = pd.concat([ag_news] * repeats, ignore_index=True).head(100_000)
    path = tmp_path / "big.csv"
    frame.to_csv(path, index=False)
    file_mb = path.stat().st_size / 2**20

    measured = subprocess.run(
        [sys.executable, "-c", MEASURE, str(tmp_path / "workspace"), str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert measured.returncode == 0, measured.stderr
    peak_growth_mb = float(measured.stdout.strip().splitlines()[-1])
    print(f"100,000-row CSV of {file_mb:.0f} MB: resident memory grew by {peak_growth_mb:.0f} MB at the peak")
    assert peak_growth_mb < 14 * file_mb  # measured: about 10 times the file (pandas, then Arrow, copies)
    workspace = Workspace(tmp_path / "workspace")
    [dataset] = workspace.datasets()
    assert dataset.n_documents == 100_000
    assert workspace.documents(dataset.dataset_id, ["position"])["position"].tolist() == list(range(100_000))
