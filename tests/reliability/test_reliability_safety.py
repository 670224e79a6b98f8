"""Safety: nothing a user supplies is unpickled or executed, rendered as markup, or used as a path.

The code scan reads every module of the core, the UI helpers and the pages. Rendering checks drive the real app
with AppTest on a run whose documents and labels are hostile.
"""

import ast
import html
import json
import os
import re
import tomllib
from pathlib import Path

import pandas as pd
import pytest
from app_helpers import new_app, open_page, refracted_text
from hostile_run import HOSTILE, build_hostile_workspace
from reliability_helpers import REPO, cli_main, error_lines
from streamlit.testing.v1 import AppTest

from prisma_core import pipeline
from prisma_core.curation import edits
from prisma_core.errors import IngestError, NotFoundError, SettingsError
from prisma_core.ingest import IngestConfig
from prisma_core.interpret.manual_labels import save_manual_label
from prisma_core.names import plain_line
from prisma_core.pipeline.report.writer import report_html
from prisma_core.store import WORKSPACE_ENV, Workspace, resolve_workspace
from ui.family_graph import LABEL_CHARS
from ui.text import md

SCANNED = sorted(
    [
        REPO / "app.py",
        *(REPO / "prisma_core").rglob("*.py"),
        *(REPO / "ui").rglob("*.py"),
        *(REPO / "pages").glob("*.py"),
    ]
)
UNSAFE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "joblib", "shelve", "marshal", "jsonpickle"}
UNSAFE_CALLS = {"eval", "exec", "pd.read_pickle", "pandas.read_pickle", "torch.jit.load", "yaml.unsafe_load"}


def dotted(node: ast.expr) -> str:
    """`torch.load` for the expression torch.load; "" for anything that is not a plain dotted name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and (base := dotted(node.value)):
        return f"{base}.{node.attr}"
    return ""


def keyword_is(call: ast.Call, name: str, value: object) -> bool:
    return any(k.arg == name and isinstance(k.value, ast.Constant) and k.value.value == value for k in call.keywords)


def unsafe_loads(path: Path) -> list[str]:
    """Every import of a pickle-based module and every call that can run code hidden in data, in one file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        where = f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path.name}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [f"{where} import {a.name}" for a in node.names if a.name.split(".")[0] in UNSAFE_MODULES]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in UNSAFE_MODULES:
            found.append(f"{where} from {node.module} import")
        elif isinstance(node, ast.Call):
            name = dotted(node.func)
            if name in UNSAFE_CALLS:
                found.append(f"{where} {name}()")
            elif name.endswith("torch.load") and not keyword_is(node, "weights_only", True):
                found.append(f"{where} torch.load() without weights_only=True")
            elif name in ("np.load", "numpy.load") and not keyword_is(node, "allow_pickle", False):
                if any(k.arg == "allow_pickle" for k in node.keywords):
                    found.append(f"{where} {name}(allow_pickle=...)")
            elif name == "yaml.load" and not any(k.arg == "Loader" for k in node.keywords):
                found.append(f"{where} yaml.load() without a safe Loader")
    return found


def test_the_scan_covers_the_core_the_ui_and_every_page() -> None:
    names = {path.relative_to(REPO).as_posix() for path in SCANNED}
    assert {"app.py", "prisma_core/sae/io.py", "prisma_core/ingest/readers.py", "ui/state.py"} <= names
    assert {f"pages/{page}.py" for page in ("datasets", "features", "families", "explore", "train")} <= names


def test_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "import pickle\nfrom joblib import load\nimport numpy as np\nimport torch\n"
        "torch.load('w.pt')\ntorch.load('w.pt', weights_only=True)\nnp.load('a.npy', allow_pickle=True)\n"
        "np.load('a.npy')\neval('1')\n"
    )
    assert [line.split(" ", 1)[1] for line in unsafe_loads(planted)] == [
        "import pickle",
        "from joblib import",
        "torch.load() without weights_only=True",
        "np.load(allow_pickle=...)",
        "eval()",
    ]


def test_no_pickle_or_code_loading_anywhere_in_the_app() -> None:
    assert [problem for path in SCANNED for problem in unsafe_loads(path)] == []


def test_weights_are_read_with_safetensors_only() -> None:
    written, read = (REPO / "prisma_core" / "sae" / name for name in ("io.py", "weights.py"))
    assert "from safetensors.torch import save" in written.read_text()  # bytes out, local folder or object store
    assert "from safetensors.numpy import load" in read.read_text()  # bytes in; torch takes the arrays from there
    assert unsafe_loads(written) == [] and unsafe_loads(read) == []
    # A pickle disguised as sae.safetensors is refused without being unpickled:
    # tests/reliability/test_reliability_faults.py::test_damaged_or_foreign_weights_are_refused_with_a_message[pickle]


# -- names never become paths -----------------------------------------------------------------------------------

HOSTILE_NAMES = ["../../etc", "/etc/passwd", "..\\..\\windows", "C:\\evil", "a/../../b", "~root", "\x00nul", "."]


def files_under(folder: Path) -> set[Path]:
    return {path for path in folder.rglob("*")}


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_dataset_names_are_stored_values_not_paths(tmp_path: Path, name: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    workspace = Workspace(tmp_path / "workspace" / "deep")
    before = files_under(tmp_path) - files_under(workspace.path)
    documents = pd.DataFrame({"doc_id": [name], "title": [name], "text": ["a short note"]})
    dataset_id = workspace.add_dataset(name, documents, [name], {})
    workspace.rename_dataset(dataset_id, f"{name}/again")

    assert workspace.dataset(dataset_id).name == plain_line(f"{name}/again")  # a NUL is not kept
    assert workspace.dataset(dataset_id).sources == [name]
    assert workspace.documents(dataset_id)["doc_id"].tolist() == [name]
    assert dataset_id.startswith("ds-") and "/" not in dataset_id and ".." not in dataset_id
    assert files_under(tmp_path) - files_under(workspace.path) == before  # nothing written outside the workspace


# -- round 4: names are bounded, visible, and never turn the text around them ---------------------------------------

RIGHT_TO_LEFT_OVERRIDE = "\u202e"
UNSHOWN_NAMES = ["\u200b", " \u200b\u200d\u3164 ", "\u202e\u2066", "\u0301"]


def test_names_of_every_level_are_bounded_and_must_show_something(workspace: Workspace, tmp_path: Path, capsys) -> None:
    run = pipeline.load_run(workspace)
    feature = int(run.features["feature_id"].iloc[0])
    before = workspace.edits.of(run.record.run_id)
    for level, target in (("theme", 0), ("subtheme", 0), ("family", 0), ("feature", feature)):
        for name in ["x" * 120_001, *UNSHOWN_NAMES]:
            edit = ("edit", "--action", "rename", "--level", level, "--id", str(target), "--name", name)
            assert cli_main(*edit, workspace=workspace) == 2, (level, name[:5])
            (message,) = error_lines(capsys.readouterr().err)
            assert "at most 120 characters" in message or "must hold something visible" in message
        with pytest.raises(SettingsError, match="at most 120 characters"):
            edits.rename(workspace, run, level, target, ("A\x00" + RIGHT_TO_LEFT_OVERRIDE) * 300_000)
    assert workspace.edits.of(run.record.run_id) == before
    with pytest.raises(SettingsError, match="something visible"):
        save_manual_label(workspace, run.record.run_id, feature, "\u200b")
    with pytest.raises(SettingsError, match="at most 120 characters"):
        workspace.rename_dataset(run.record.dataset_id, "d" * 121)
    notes = tmp_path / "notes.csv"
    notes.write_text("text\n" + "a note\n" * 3)
    assert cli_main("ingest", str(notes), "--name", "\u200b", workspace=workspace) == 2
    assert "The dataset's name must hold something visible" in error_lines(capsys.readouterr().err)[0]


def test_the_report_strips_nul_and_isolates_right_to_left_names(workspace: Workspace, tmp_path: Path) -> None:
    run = pipeline.load_run(workspace)
    hebrew = "שלום עולם"
    edits.rename(workspace, run, "theme", 0, f"{hebrew}\x00{RIGHT_TO_LEFT_OVERRIDE} 2024", "a\x00b")
    run = pipeline.load_run(workspace)
    assert run.theme_info.set_index("theme_id").loc[0, "label"] == f"{hebrew} 2024"  # stored without them
    workspace.labels.add(
        run.record.run_id, [{"feature_id": 0, "label": f"x\x00y{RIGHT_TO_LEFT_OVERRIDE}z", "source": "old"}]
    )
    page = report_html(workspace, pipeline.load_run(workspace))
    assert "\x00" not in page and RIGHT_TO_LEFT_OVERRIDE not in page  # stored before names were checked: cleaned
    assert re.search(f"\u2068Theme 0: {hebrew} 2024\u2069", page)  # every text holding it is isolated
    assert page.count("\u2068") == page.count("\u2069")


def test_a_dataset_named_after_a_long_file_gets_its_first_120_characters(tmp_path: Path) -> None:
    path = tmp_path / f"{'notes ' * 35}.csv"  # 210 characters
    path.write_text("text\n" + "a note\n" * 3)
    workspace = Workspace(tmp_path / "workspace")
    dataset_id, _ = pipeline.ingest(workspace, [path])
    assert len(workspace.dataset(dataset_id).name) == 120


@pytest.mark.parametrize("name", ["../../etc/passwd.txt", "/etc/hosts.txt", "..\\..\\boot.ini.txt"])
def test_uploaded_file_names_are_labels_not_paths(tmp_path: Path, name: str) -> None:
    workspace = Workspace(tmp_path / "workspace")
    before = files_under(tmp_path) - files_under(workspace.path)
    dataset_id, _ = pipeline.ingest(workspace, [(name, b"the text of the note")], None, IngestConfig())
    assert workspace.documents(dataset_id)["doc_id"].tolist() == [name]
    assert workspace.dataset(dataset_id).sources == [name]
    assert files_under(tmp_path) - files_under(workspace.path) == before


@pytest.mark.parametrize("hostile_id", ["../../victim", "run-1/../../victim", "x' OR '1'='1", "", "RUN-UPPER"])
def test_ids_from_outside_are_refused_before_any_file_or_row_is_touched(tmp_path: Path, hostile_id: str) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me")
    workspace = Workspace(tmp_path / "workspace" / "ws")
    documents = pd.DataFrame({"doc_id": ["1"], "title": [None], "text": ["a note"]})
    dataset_id = workspace.add_dataset("kept", documents, ["kept.csv"], {})
    for action in (workspace.delete_run, workspace.delete_dataset, workspace.run, workspace.dataset):
        with pytest.raises(NotFoundError):
            action(hostile_id)
    assert (victim / "precious.txt").read_text() == "keep me"
    assert [d.dataset_id for d in workspace.datasets()] == [dataset_id]


def test_workspace_folder_from_the_environment_is_resolved(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(WORKSPACE_ENV, str(tmp_path / "a" / ".." / "b"))
    assert resolve_workspace() == str((tmp_path / "b").resolve())
    assert Workspace().path == (tmp_path / "b").resolve()
    monkeypatch.setenv(WORKSPACE_ENV, "~/prisma-test-workspace")
    assert resolve_workspace() == str(Path.home().resolve() / "prisma-test-workspace")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(WORKSPACE_ENV)
    assert resolve_workspace() == str((tmp_path / "prisma_data").resolve())
    assert os.path.isabs(resolve_workspace("relative/folder"))


# -- upload size limits -----------------------------------------------------------------------------------------


def test_streamlit_upload_limit_matches_the_ingest_limit() -> None:
    config = tomllib.loads((REPO / ".streamlit" / "config.toml").read_text())
    max_upload_mb = config["server"]["maxUploadSize"]
    assert max_upload_mb * 2**20 == IngestConfig().max_file_bytes  # the browser refuses what Prisma would refuse
    assert IngestConfig().max_total_bytes >= IngestConfig().max_file_bytes


def test_size_limits_are_checked_before_any_file_is_read(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "workspace")
    config = IngestConfig(max_file_bytes=1_000, max_total_bytes=1_500)
    huge_garbage = ("huge.pdf", b"%PDF" + bytes(5_000))  # would be refused as a broken PDF if it were read
    with pytest.raises(
        IngestError, match=re.escape("huge.pdf: 5,004 bytes is more than the 1,000-byte limit per file")
    ):
        pipeline.ingest(workspace, [huge_garbage], None, config)
    with pytest.raises(IngestError, match=re.escape("the files add up to 1,800 bytes, more than the 1,500-byte limit")):
        pipeline.ingest(workspace, [("a.txt", b"a" * 900), ("b.txt", b"b" * 900)], None, config)
    assert workspace.datasets() == []


# -- user content is rendered inert in the app (AppTest) --------------------------------------------------------

UNESCAPED_MARKUP = re.compile(r"(?<!\\)<\s*/?\s*(script|img|iframe|svg)\b|(?<!\\)\]\((javascript|data):", re.I)
PAGES = ["home", "datasets", "embeddings", "train", "features", "families", "explore"]


def test_markup_check_tells_raw_markup_from_escaped_text() -> None:
    for markup in HOSTILE[:4]:
        assert UNESCAPED_MARKUP.search(markup) and not UNESCAPED_MARKUP.search(md(markup))


@pytest.fixture(scope="module")
def hostile_workspace(tmp_path_factory: pytest.TempPathFactory, bbc: pd.DataFrame) -> Path:
    return build_hostile_workspace(tmp_path_factory.mktemp("hostile"), bbc)


def element_protos(node: object) -> list[object]:
    """Every element and block proto below an AppTest node, depth first."""
    protos = [node.proto] if getattr(node, "proto", None) is not None else []
    for child in getattr(node, "children", {}).values():
        protos += element_protos(child)
    return protos


PLAIN_ELEMENTS = {"Text", "Code", "Arrow", "ArrowVegaLiteChart", "VegaLiteChart", "ComponentInstance", "Json"}
"""Shown as plain text, table cells or chart data: never interpreted as markup."""


def rendered_as_markdown(proto: object) -> list[str]:
    """The strings of an element that Streamlit renders as markdown: bodies, labels, help, radio options."""
    kind = proto.DESCRIPTOR.name
    if kind == "Block":
        which = proto.WhichOneof("type")
        inner = getattr(proto, which) if which else None
        return [inner.label] if inner is not None and "label" in inner.DESCRIPTOR.fields_by_name else []
    if kind in PLAIN_ELEMENTS:
        return []
    strings = [getattr(proto, name) for name in ("body", "label", "help") if name in proto.DESCRIPTOR.fields_by_name]
    if kind == "Radio":
        strings += list(proto.options)
    return [string for string in strings if isinstance(string, str)]


def visit(page: str, workspace_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv(WORKSPACE_ENV, str(workspace_path))
    at = open_page(new_app(), page)
    assert not at.exception, at.exception
    return at


@pytest.mark.parametrize("page", PAGES)
def test_hostile_content_is_shown_as_text_on_every_page(hostile_workspace, monkeypatch, page: str) -> None:
    at = visit(page, hostile_workspace, monkeypatch)
    protos = element_protos(at._tree)
    markdown = [text for proto in protos for text in rendered_as_markdown(proto)]
    assert [text for text in markdown if UNESCAPED_MARKUP.search(text)] == []
    assert not [p for p in protos if p.DESCRIPTOR.name == "Markdown" and p.allow_html]
    assert not [p for p in protos if p.DESCRIPTOR.name in ("Html", "IFrame")]
    assert "alert(" in "".join(str(proto) for proto in protos)  # the hostile content is on the page


def test_hostile_label_is_escaped_in_the_feature_card(hostile_workspace, monkeypatch) -> None:
    at = visit("features", hostile_workspace, monkeypatch)
    feature = at.selectbox(key="feature_pick").value
    (title,) = [s.value for s in at.subheader if s.value.startswith(f"Feature #{feature}:")]
    assert title == f"Feature #{feature}: " + md(f"{HOSTILE[feature % 2]} {HOSTILE[2]} f{feature}")
    at.text_input(key="feature_search").input("<img src=x onerror=").run()
    assert not at.exception
    assert any(md("<img src=x onerror=") in caption.value for caption in at.caption)


def test_hostile_labels_are_escaped_in_the_family_graph(hostile_workspace, monkeypatch) -> None:
    at = visit("families", hostile_workspace, monkeypatch)
    (component,) = at.get("component_instance")
    graph = json.loads(json.loads(component.proto.json_args)["data"])
    assert graph["nodes"]
    for node in graph["nodes"]:  # the graph component builds each tooltip with innerHTML: it must get no markup
        assert "<" not in node["title"]
        assert "&lt;" in node["title"]
        # labels are drawn on a canvas, as plain text: escaping them would show "AT&amp;T"
        assert node["label"].startswith(f"#{node['id']} {HOSTILE[int(node['id']) % 2]}"[: LABEL_CHARS - 1])
        assert html.unescape(node["title"]).startswith(f"#{node['id']} {HOSTILE[int(node['id']) % 2]}")


def test_hostile_document_is_refracted_as_text(hostile_workspace, monkeypatch) -> None:
    at = visit("explore", hostile_workspace, monkeypatch)
    documents = Workspace(hostile_workspace).documents(Workspace(hostile_workspace).datasets()[0].dataset_id)
    at.selectbox(key="refract_doc").select(0).run()
    assert not at.exception
    workspace = Workspace(hostile_workspace)
    run = pipeline.load_run(workspace)
    text = documents["text"].iloc[0]
    refracted_text(at, workspace, run, 0, text)  # the whole text, as markdown with its own markup escaped
    assert "<script>" in text and not any("<script>" in element.value for element in at.markdown)
