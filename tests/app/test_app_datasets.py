"""Datasets page: upload through the file uploader, column choice, the ingest report, rename, delete, errors."""

import pandas as pd
from app_helpers import bbc_csv, new_app, open_page, texts

from prisma_core.store import Workspace

pytest_plugins = ["app_fixtures"]  # the shared trained workspace


def test_upload_with_chosen_columns_stores_every_row(trained_app):
    dataset = trained_app.workspace.dataset(trained_app.dataset_id)
    assert dataset.name == "BBC sample"
    assert dataset.n_documents == len(trained_app.frame)
    assert dataset.metadata_columns == ["category"]
    docs = trained_app.workspace.documents(trained_app.dataset_id, ["position", "doc_id", "title", "text"])
    assert docs["doc_id"].tolist() == trained_app.frame["id"].tolist()
    assert docs["title"].tolist() == trained_app.frame["title"].tolist()
    assert docs["text"].tolist() == trained_app.frame["text"].tolist()


def test_preview_guesses_text_column_and_report_counts_duplicates(app_workspace, corpora_dir):
    frame, _ = bbc_csv(corpora_dir, 30)
    frame = pd.concat([frame, frame.head(2).assign(id=["dup-1", "dup-2"]), frame.head(1).assign(id="empty", text="")])
    at = new_app()
    open_page(at, "datasets")
    at.file_uploader(key="upload").set_value(("with_problems.csv", frame.to_csv(index=False).encode(), "text/csv"))
    at.run()
    assert not at.exception
    assert at.selectbox(key="text_column").value == "text"
    assert at.text_input(key="dataset_name").value == "with_problems"
    assert len(at.dataframe[0].value) == 20  # the preview
    assert at.selectbox(key="id_column").value == "id"  # guessed from the name; ids are unique in the preview
    assert at.selectbox(key="title_column").value == "title"  # a title column is picked, not "(automatic)"
    n_datasets = len(Workspace(app_workspace).datasets())
    at.button(key="create_dataset").click().run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics == {"Empty documents left out": "1", "Duplicate texts (kept)": "2", "Repeated ids renamed": "0"}
    assert texts(at.success) == ["Created “with_problems”: 32 documents from 1 file(s)."]
    assert at.sidebar.selectbox(key="dataset_id").value != ""
    stored = Workspace(app_workspace).dataset(at.session_state["dataset_id"])
    assert stored.n_documents == 32
    assert stored.report["duplicate_text_ids"] == ["dup-1", "dup-2"]
    at.button(key="create_dataset").click().run()  # clicked again: no second, identical dataset
    assert not at.exception
    assert "This upload is already stored as a dataset (see below)." in texts(at.info)
    assert len(Workspace(app_workspace).datasets()) == n_datasets + 1


def test_a_category_chosen_as_the_text_column_is_warned_about_before_creating(app_workspace, corpora_dir):
    frame, csv = bbc_csv(corpora_dir, 60)
    at = new_app()
    open_page(at, "datasets")
    at.file_uploader(key="upload").set_value(("bbc.csv", csv, "text/csv")).run()
    assert at.selectbox(key="text_column").value == "text" and not at.warning
    n_datasets = len(Workspace(app_workspace).datasets())
    at.selectbox(key="text_column").select("category").run()
    assert not at.exception
    (warning,) = texts(at.warning)
    assert warning.startswith(
        f"The text column “category” looks like a category, not text: its first 60 documents hold only "
        f"{frame['category'].nunique()} different values"
    )
    assert len(Workspace(app_workspace).datasets()) == n_datasets  # said before anything is stored
    at.selectbox(key="text_column").select("id").run()
    assert "holds very short values" in texts(at.warning)[0]


def test_rename_then_delete_the_selected_dataset(app_workspace):
    at = new_app()
    open_page(at, "datasets")
    at.file_uploader(key="upload").set_value(
        [("a.txt", b"First note about asthma.", "text/plain"), ("b.md", b"# Second\nabout fever", "text/markdown")]
    ).run()
    assert "Each file becomes one document; its name is the id and title." in texts(at.caption)
    at.button(key="create_dataset").click().run()
    dataset_id = at.session_state["dataset_id"]
    assert Workspace(app_workspace).dataset(dataset_id).n_documents == 2

    at.text_input(key=f"rename_{dataset_id}").input("Two notes")
    at.button(key="FormSubmitter:rename_form-Rename").click().run()
    assert Workspace(app_workspace).dataset(dataset_id).name == "Two notes"

    assert at.button(key="delete_dataset").disabled
    at.checkbox(key=f"confirm_delete_{dataset_id}").check().run()
    at.button(key="delete_dataset").click().run()
    assert not at.exception
    assert dataset_id not in [d.dataset_id for d in Workspace(app_workspace).datasets()]


def test_wrong_file_shows_what_to_do_and_stores_nothing(app_workspace):
    before = len(Workspace(app_workspace).datasets())
    at = new_app()
    open_page(at, "datasets")
    at.file_uploader(key="upload").set_value(("numbers.csv", b"a,b\n1,2\n3,4\n", "text/csv")).run()
    assert not at.exception
    (error,) = texts(at.error)
    assert error.startswith("no text-like column; the columns are: a, b. Prisma needs a column of text")
    assert not [button for button in at.button if button.key == "create_dataset"]
    assert len(Workspace(app_workspace).datasets()) == before
