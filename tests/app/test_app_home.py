"""Home page: the workspace overview, the next step, and the one-click demo that ends on the Features page."""

from app_helpers import features_table, new_app, open_page, table, texts, wait_for_job

from prisma_core.pipeline.demo import DEMO_NAME, SAMPLE_NAME
from prisma_core.reading.run_quality import run_name
from ui.state import run_widget_key

pytest_plugins = ["app_fixtures"]  # the shared trained workspace


def test_overview_and_next_step(trained_app):
    at = new_app(trained_app.dataset_id, trained_app.run_id)
    assert not at.exception
    overview = table(at, "dataset", "documents", "trained models").set_index("dataset")
    assert overview.at["BBC sample", "documents"] == 150
    assert overview.at["BBC sample", "trained models"] == len(trained_app.workspace.runs(trained_app.dataset_id))
    shown = run_name(trained_app.workspace.run(trained_app.run_id))
    assert f"“BBC sample” has a trained model: look at its concepts. Shown: {shown}." in texts(at.markdown)
    assert [link.label for link in at.main.get("page_link")] == [
        "Browse features",
        "See feature families",
        "Explore documents",
    ]


def test_demo_runs_with_defaults_and_opens_the_features(app_workspace, trained_app):
    at = new_app()
    assert any("60 clinical notes from" in text for text in texts(at.markdown))
    at.button(key="demo").click().run()
    wait_for_job("demo")
    at.run()
    assert not at.exception
    assert texts(at.title) == ["Features"]
    (demo,) = [d for d in trained_app.workspace.datasets() if d.name == DEMO_NAME]
    assert demo.n_documents == 60
    assert demo.metadata_columns == ["specialty"]
    assert at.sidebar.selectbox(key="dataset_id").value == demo.dataset_id
    (run,) = trained_app.workspace.runs(demo.dataset_id)
    assert at.sidebar.selectbox(key=run_widget_key(demo.dataset_id)).value == run.run_id
    assert len(features_table(at)) == run.metrics["features_kept"]

    again = new_app()  # on Home (an AppTest.switch_page would pin the page and hide the app's own switch)
    again.button(key="demo").click().run()
    wait_for_job("demo")
    again.run()
    assert texts(again.title) == ["Features"]
    assert len([d for d in trained_app.workspace.datasets() if d.name == DEMO_NAME]) == 1
    assert len(trained_app.workspace.runs(demo.dataset_id)) == 1


def test_an_overfitted_run_is_named_so_with_what_to_change(trained_app, monkeypatch):
    import prisma_core.reading.run_quality

    monkeypatch.setattr(
        prisma_core.reading.run_quality, "OVERFIT_GAP", -1.0
    )  # the small test run is not overfitted: call
    monkeypatch.setattr(prisma_core.reading.run_quality, "OVERFIT_RATIO", 0.0)  # every run so
    at = new_app(trained_app.dataset_id, trained_app.run_id)
    (warning,) = [text for text in texts(at.warning) if "(overfitting)" in text]
    assert "it has memorised its training documents instead of learning general concepts (overfitting)" in warning
    assert "train again with fewer epochs (try 5 instead of 10), fewer features (try 32 instead of 64)" in warning
    run_picker = at.sidebar.selectbox(key=run_widget_key(trained_app.dataset_id))
    assert run_picker.format_func(run_picker.value).endswith(" · overfitted")
    open_page(at, "train")
    assert warning in texts(at.warning)
    assert "of what sets each document apart" in " ".join(texts(at.caption))


def test_demo_without_network_offers_an_upload_of_a_local_copy(app_workspace, corpora_dir, tmp_path, monkeypatch):
    import prisma_core.pipeline.demo
    from prisma_core.pipeline.demo import DemoDownloadError
    from ui.state import job_registry

    def offline(url, target, timeout):
        raise DemoDownloadError(f"Could not download the demo corpus from {url} (<urlopen error [Errno -3] ...>).")

    monkeypatch.setattr(prisma_core.pipeline.demo, "_download", offline)
    monkeypatch.setenv("PRISMA_WORKSPACE", str(tmp_path))  # an empty workspace: no demo yet
    monkeypatch.delenv("PRISMA_DEMO_FILE")
    at = new_app()
    at.button(key="demo_large").click().run()
    assert job_registry().wait("demo", 120).error is not None
    at.run()
    assert not at.exception and not at.error
    (warning,) = texts(at.warning)
    assert warning.startswith("The demo documents could not be downloaded: this computer seems to be offline")
    assert warning.endswith("“Run with defaults” needs no network: its notes come with Prisma.")
    assert "urlopen" not in warning and "PRISMA_DEMO_FILE" not in warning
    assert next(link.label for link in at.main.get("page_link")) == "Or analyse your own documents: upload any CSV"

    copy = (corpora_dir / "mtsamples.parquet").read_bytes()
    at.file_uploader(key="demo_upload").set_value(("mtsamples.parquet", copy, "application/octet-stream")).run()
    wait_for_job("demo")
    at.run()
    assert not at.exception
    assert texts(at.title) == ["Features"]


def test_the_default_demo_runs_offline_on_the_notes_shipped_with_prisma(tmp_path, monkeypatch):
    import prisma_core.pipeline.demo
    from prisma_core.store import Workspace
    from ui.state import job_registry

    def no_network(url, target, timeout):
        raise AssertionError(f"the default demo downloaded {url}")

    monkeypatch.setattr(prisma_core.pipeline.demo, "_download", no_network)
    monkeypatch.setenv("PRISMA_WORKSPACE", str(tmp_path))
    monkeypatch.delenv("PRISMA_DEMO_FILE", raising=False)
    monkeypatch.setenv("PRISMA_DEMO_DOCS", "60")
    at = new_app()
    assert any("60 clinical notes written for this demo (fictional patients, CC0)" in t for t in texts(at.markdown))
    assert any(text.startswith("A larger demo: 60 clinical notes from [MTSamples]") for text in texts(at.caption))
    at.button(key="demo").click().run()
    job = job_registry().wait("demo", 600)
    assert job.error is None, job.error_message
    at.run()
    assert not at.exception and texts(at.title) == ["Features"]
    (demo,) = Workspace(tmp_path).datasets()
    assert (demo.name, demo.n_documents, demo.metadata_columns) == (SAMPLE_NAME, 60, ["specialty"])
    specialties = Workspace(tmp_path).metadata(demo.dataset_id)["specialty"]
    assert specialties.nunique() == 6 and specialties.value_counts().min() >= 5
    assert not (tmp_path / "demo").exists()  # nothing was downloaded or cached


def test_a_second_demo_click_opens_the_stored_result_without_a_job(app_workspace, trained_app):
    from ui.state import job_registry

    new_app().button(key="demo").click().run()  # the demo exists (first demo test, or built here)
    wait_for_job("demo")
    before = job_registry().get("demo")
    at = new_app()
    at.button(key="demo").click().run()
    assert texts(at.title) == ["Features"]
    assert job_registry().get("demo") is before  # opened at once: no background job was started


def test_glossary_explains_the_words_that_stay(app_workspace):
    from ui.glossary import TERMS

    at = open_page(new_app(), "glossary")
    assert not at.exception
    assert texts(at.title) == ["Glossary"]
    shown = " ".join(texts(at.markdown))
    for term in ("Detail captured", "Overfitting", "Never-firing features", "Label score", "Lift", "Theme"):
        assert f"**{term}**" in shown
    assert "**τ (tau)**" in shown and "**k (features per document)**" in shown and "**K" not in shown
    assert len(TERMS) >= 15
    assert [link.label for link in at.sidebar.get("page_link")][-1] == "Glossary"
