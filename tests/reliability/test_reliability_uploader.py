"""The bad-input catalogue through the app's uploader (AppTest, as an analyst would upload): a refused upload
gives the core's message and stores nothing; an accepted one is stored and reported.

tests/reliability/test_reliability_inputs.py sends the same catalogue through `pipeline.ingest`.
"""

import random
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from app_helpers import new_app, open_page, texts
from bad_inputs import ARTICLE, csv, encrypted_pdf, zip_bomb
from document_files import zip_of
from reliability_helpers import snapshot
from streamlit.testing.v1 import AppTest

from prisma_core.ingest import Source
from prisma_core.store import WORKSPACE_ENV, Workspace

OCTET = "application/octet-stream"
CREATE = "create_dataset"
ZIP_BOMB_MB = 201
"""Just past the app's per-file limit (200 MB, also Streamlit's maxUploadSize): about 200 KB packed."""


@pytest.fixture
def app_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[AppTest, Workspace]:
    """A fresh app session on the Datasets page, on its own workspace that already holds a dataset."""
    monkeypatch.setenv(WORKSPACE_ENV, str(tmp_path / "app_workspace"))
    workspace = Workspace(tmp_path / "app_workspace")
    documents = pd.DataFrame({"doc_id": ["1", "2"], "title": [None, None], "text": [ARTICLE, "Second text."]})
    workspace.add_dataset("existing", documents, ["existing.csv"], {})
    return open_page(new_app(), "datasets"), workspace


def upload(at: AppTest, files: list[Source], picks: dict[str, str]) -> AppTest:
    at.file_uploader(key="upload").set_value([(name, data, OCTET) for name, data in files]).run()
    for key, column in picks.items():
        at.selectbox(key=key).select(column)
    return at.run()


# (case, files, columns picked, message); where the app shows it depends on the problem: at the preview, when
# the columns are proposed, or when the dataset is created.
APP_REFUSED: list[tuple[str, Callable[[], list[Source]], dict[str, str], str]] = [
    ("empty file", lambda: [("empty.csv", b"")], {}, "empty.csv: the file is empty (0 bytes)"),
    (
        "whitespace-only documents",
        lambda: [csv("id,title,text\n1,First title,   \n2,Second title,\t\n")],
        {"text_column": "text", "id_column": "id"},
        "table.csv: no non-empty documents were found",
    ),
    (
        "no text-like column",
        lambda: [csv("year,value,code\n2001,1.5,12\n2002,2.5,34\n")],
        {},
        "no text-like column; the columns are: year, value, code. Prisma needs a column of text",
    ),
    ("0-byte PDF", lambda: [("scan.pdf", b"")], {}, "scan.pdf: the file is empty (0 bytes)"),
    ("encrypted PDF", lambda: [("locked.pdf", encrypted_pdf())], {}, "locked.pdf: the PDF is password-protected"),
    (
        "DOCX that is a zip of something else",
        lambda: [("letter.docx", zip_of({"readme.txt": b"not a word document"}))],
        {},
        "letter.docx: is not a valid Word .docx file",
    ),
    (
        "binary garbage named .csv",
        lambda: [("data.csv", random.Random(0).randbytes(4096))],
        {},
        "data.csv: does not look like a text table (binary content)",
    ),
    (
        "zip with ../ paths",
        lambda: [("upload.zip", zip_of({"fine.txt": b"harmless text", "../../evil.txt": b"payload"}))],
        {},
        "upload.zip: refused, it holds unsafe paths (../../evil.txt)",
    ),
    (
        "zip with absolute paths",
        lambda: [("upload.zip", zip_of({"/etc/cron.d/evil.txt": b"payload"}))],
        {},
        "upload.zip: refused, it holds unsafe paths (/etc/cron.d/evil.txt)",
    ),
    (
        "zip bomb",
        lambda: [("bomb.zip", zip_bomb(ZIP_BOMB_MB))],
        {},
        "bomb.zip: unpacks to more than 209,715,200 bytes, the limit (refused: too large, or a zip bomb)",
    ),
    (
        "zip holding a damaged file",
        lambda: [("bundle.zip", zip_of({"a.txt": b"fine text", "b.pdf": b"not a pdf at all"}))],
        {},
        "b.pdf: is not a readable PDF",
    ),
    (
        "one bad file among good ones",
        lambda: [("notes.txt", ARTICLE.encode()), ("locked.pdf", encrypted_pdf())],
        {},
        "locked.pdf: the PDF is password-protected",
    ),
    (
        "document over the length limit",
        lambda: [csv(f"id,text\nshort,fine words\nhuge,{'x' * 2_000_001}\n")],
        {"text_column": "text", "id_column": "id"},
        "table.csv: document 'huge' has 2,000,001 characters; the limit is 2,000,000",
    ),
]


@pytest.mark.parametrize(("case", "files", "picks", "message"), APP_REFUSED, ids=[case for case, *_ in APP_REFUSED])
def test_uploader_refuses_bad_input_with_its_message_and_stores_nothing(app_session, case, files, picks, message):
    at, workspace = app_session
    before = snapshot(workspace)
    upload(at, files(), picks)
    if [button for button in at.button if button.key == CREATE]:
        at.button(key=CREATE).click().run()
        assert texts(at.error)[0].endswith(". Nothing was stored.")
    assert not at.exception
    (error,) = texts(at.error)
    assert message in error
    assert snapshot(workspace) == before
    assert [dataset.name for dataset in workspace.datasets()] == ["existing"]


def test_uploader_ignores_file_types_it_does_not_offer(app_session) -> None:
    at, workspace = app_session
    before = snapshot(workspace)
    upload(at, [("setup.exe", b"MZ\x90\x00"), ("old.doc", b"\xd0\xcf\x11\xe0")], {})
    assert not at.exception and not at.error and not at.dataframe[1:]  # only the datasets table, no preview
    assert not [button for button in at.button if button.key == CREATE]
    assert snapshot(workspace) == before


def created(at: AppTest, workspace: Workspace, files: list[Source], picks: dict[str, str]) -> pd.DataFrame:
    """Upload, create, and return the stored documents after checking the app reported the upload."""
    upload(at, files, picks).button(key=CREATE).click().run()
    assert not at.exception and not at.error
    (dataset,) = [d for d in workspace.datasets() if d.name != "existing"]
    assert texts(at.success) == [
        f"Created “{dataset.name}”: {dataset.n_documents:,} documents from {len(files)} file(s)."
    ]
    return workspace.documents(dataset.dataset_id)


def test_uploader_stores_awkward_but_valid_tables_and_reports_them(app_session) -> None:
    at, workspace = app_session
    table = (
        "id,text\n7,<script>alert('x')</script> first\n7,=HYPERLINK(\"http://evil\")\n,   \n"
        "8.0,<img src=x onerror=alert(1)>\n9,\n"
    )
    documents = created(at, workspace, [csv(table, "awkward.csv")], {"text_column": "text", "id_column": "id"})
    assert documents["doc_id"].tolist() == ["7", "7#2", "8.0"]
    assert documents["text"].tolist() == [
        "<script>alert('x')</script> first",
        '=HYPERLINK("http://evil")',
        "<img src=x onerror=alert(1)>",
    ]
    metrics = {metric.label: metric.value for metric in at.metric}
    assert metrics == {"Empty documents left out": "2", "Duplicate texts (kept)": "0", "Repeated ids renamed": "1"}
    assert any(caption.endswith(": 3, 9") for caption in texts(at.caption))  # the empty rows, by their ids


@pytest.mark.parametrize("encoding", ["latin-1", "utf-16"])
def test_uploader_decodes_other_encodings(app_session, encoding: str) -> None:
    at, workspace = app_session
    texts_in = ["Café crème à Zürich: £5", "naïve façade; déjà vu"]
    files = [csv(f"id,text\n1,{texts_in[0]}\n2,{texts_in[1]}\n", "notes.csv", encoding)]
    documents = created(at, workspace, files, {"text_column": "text", "id_column": "id"})
    assert documents["text"].tolist() == texts_in
    assert texts(at.warning) == (["notes.csv: not UTF-8, decoded as cp1252"] if encoding == "latin-1" else [])


def test_uploader_takes_a_single_document_and_a_million_characters(app_session, bbc: pd.DataFrame) -> None:
    at, workspace = app_session
    book = " ".join(bbc["text"])[:1_000_000]
    documents = created(at, workspace, [("book.txt", book.encode())], {})
    assert documents["doc_id"].tolist() == ["book.txt"] and documents["text"].iloc[0] == book


def test_uploader_takes_a_hundred_thousand_rows(app_session, ag_news: pd.DataFrame) -> None:
    at, workspace = app_session
    frame = pd.concat([ag_news] * -(-100_000 // len(ag_news)), ignore_index=True).head(100_000)
    documents = created(at, workspace, [("big.csv", frame.to_csv(index=False).encode())], {"text_column": "text"})
    assert len(documents) == 100_000
    assert documents["text"].iloc[-1] == frame["text"].iloc[-1]
    # Too few documents for an SAE, through the app: tests/app/test_app_train.py::test_too_few_documents_for_an_sae
