"""The stage contract (prisma_core/pipeline/stages.py, prisma_core/store/stages.py): every stage is registered once,
with the tables it makes; the tables of a real run are those the registry declares, each made by one stage; deleting
a run empties every table of a run; a run is the chain of its stage records, sub-themes, report and export included;
and the code names stages by the registry's constants only."""

import ast
from dataclasses import asdict
from pathlib import Path

from prisma_core import embed, pipeline
from prisma_core.lineage import Stage
from prisma_core.pipeline.edits import rename
from prisma_core.pipeline.report.config import ReportConfig
from prisma_core.pipeline.report.writer import downloaded_report, write_report
from prisma_core.pipeline.stages import STAGES
from prisma_core.reading.explore import saved_document_map
from prisma_core.store import Workspace
from prisma_core.store.stages import (
    EDITS,
    EMBEDDING,
    EXPORT,
    FAMILIES,
    INGEST,
    KEYWORDS,
    LOCKS,
    RECORDS,
    REPORT,
    RUN_TABLES,
    STAGE_TABLES,
    SUBTHEMES,
    THEMES,
    TRAINING,
    table_kind,
)

CORE = Path(embed.__file__).resolve().parents[1]
NOT_OF_A_STAGE = (RECORDS, EDITS, LOCKS)


def test_the_registry_holds_every_declared_stage_once_in_the_order_of_its_tables() -> None:
    assert [stage.name for stage in STAGES] == list(STAGE_TABLES)
    assert all(isinstance(stage, Stage) and stage.tables == STAGE_TABLES[stage.name] for stage in STAGES)
    declared = [table for stage in STAGES for table in stage.tables]
    assert len(declared) == len(set(declared)) and not set(declared) & set(NOT_OF_A_STAGE)


def reported_run(small_run, folder: Path) -> tuple[Workspace, pipeline.LoadedRun, Path]:
    """A copy of the small run, its map drawn, one of its themes renamed and its report written."""
    workspace = small_run.copy(folder / "workspace")
    run = pipeline.load_run(workspace, small_run.run.run_id)
    saved_document_map(workspace, run.record.dataset_id, run.record.embedding_key)
    rename(workspace, run, "theme", 0, "Renamed theme")
    report = write_report(workspace, run, folder / "report.html", ReportConfig(predict=False))
    return workspace, run, report


def test_every_table_a_run_writes_is_declared_by_exactly_one_stage(small_run, tmp_path) -> None:
    workspace, _, _ = reported_run(small_run, tmp_path)
    stored = {table_kind(name) for name in workspace.db.list_tables().tables}
    declared = {table: [stage.name for stage in STAGES if table in stage.tables] for table in stored}
    assert {table: stages for table, stages in declared.items() if len(stages) != 1} == {
        table: [] for table in stored & set(NOT_OF_A_STAGE)
    }
    assert {table for stage in STAGES for table in stage.tables} | {RECORDS, EDITS} == stored  # each one written


def rows_of_run(workspace: Workspace, run_id: str) -> dict[str, int]:
    return {name: workspace.db.open_table(name).count_rows(f"run_id = '{run_id}'") for name in RUN_TABLES}


def test_deleting_a_run_removes_its_rows_from_every_table_of_a_run(small_run, tmp_path) -> None:
    workspace, run, _ = reported_run(small_run, tmp_path)
    run_id, dataset_id = run.record.run_id, run.record.dataset_id
    before = rows_of_run(workspace, run_id)
    assert all(before.values()), before  # the run has rows in every one of them
    n_documents = len(workspace.documents(dataset_id))
    workspace.delete_run(run_id)
    assert rows_of_run(workspace, run_id) == dict.fromkeys(RUN_TABLES, 0)
    assert len(workspace.documents(dataset_id)) == n_documents  # the dataset's rows are kept
    assert [record.stage for record in workspace.stage_records.of(dataset_id)] == [INGEST, EMBEDDING]


def test_a_run_is_the_chain_of_its_stage_records_sub_themes_and_report_included(small_run, tmp_path) -> None:
    workspace, run, report = reported_run(small_run, tmp_path)
    records = workspace.stage_records.of(run.record.dataset_id, run.record.run_id)
    # the training's record is written last of the training's, just before the run record that lists the run; the
    # report's is the newest (between them: what other tests did to the shared run before it was copied, e.g. exports)
    chain = [INGEST, EMBEDDING, KEYWORDS, SUBTHEMES, THEMES, FAMILIES, TRAINING]
    assert [record.stage for record in records][: len(chain)] == chain and records[-1].stage == REPORT
    order = [stage.name for stage in STAGES]
    after_sae = [record.stage for record in records if record.parent_id == run.record.run_id][:-1]
    assert after_sae == sorted(after_sae, key=order.index)  # in the registry's order
    written = records[-1]
    assert written.parent_id == written.run_id == run.record.run_id
    assert written.config == asdict(ReportConfig(predict=False))
    assert written.summary["path"] == str(report) and written.summary["bytes"] == report.stat().st_size > 0


def test_a_downloaded_report_leaves_its_record_too(small_run, tmp_path) -> None:
    workspace = small_run.copy(tmp_path / "workspace")
    run = pipeline.load_run(workspace, small_run.run.run_id)
    config = ReportConfig(predict=False, typical_documents=1)
    page = downloaded_report(workspace, run, config)
    record = workspace.stage_records.of(run.record.dataset_id, run.record.run_id)[-1]
    assert (record.stage, record.parent_id, record.config) == (REPORT, run.record.run_id, asdict(config))
    assert record.summary["bytes"] == len(page.encode()) and "path" not in record.summary  # no file written


def test_an_export_leaves_its_record_naming_its_folder_and_files(small_run, tmp_path) -> None:
    workspace = small_run.copy(tmp_path / "workspace")
    run_id = small_run.run.run_id
    paths = pipeline.export_run(workspace, run_id, tmp_path / "export")
    record = workspace.stage_records.of(small_run.dataset_id, run_id)[-1]
    assert (record.stage, record.parent_id, record.run_id, record.config) == (EXPORT, run_id, run_id, {})
    assert record.summary["path"] == str(tmp_path / "export") and record.summary["files"] == [p.name for p in paths]
    assert record.summary["bytes"] == sum(path.stat().st_size for path in paths) > 0


def stage_names_written_out(path: Path) -> list[str]:
    """Where a module names a stage by a string of its own: a record written, or a record's `stage` compared with
    it (in Python or in a filter)."""
    names, found = set(STAGE_TABLES), []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "record_stage" and len(node.args) > 1:
            texts = [node.args[1]]
        elif isinstance(node, ast.Compare) and getattr(node.left, "attr", "") == "stage":
            texts = [text for side in node.comparators for text in ast.walk(side)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "stage = '" in node.value:
            texts = [ast.Constant(node.value.split("stage = '")[1].split("'")[0])]
        else:
            continue
        found += [f"{path.name}:{node.lineno}" for text in texts if getattr(text, "value", None) in names]
    return sorted(found)


def test_the_check_finds_stage_names_written_out(tmp_path) -> None:
    module = tmp_path / "module.py"
    module.write_text(
        'record_stage(workspace, "themes", run_id)\n'
        'mine = [record for record in records if record.stage == "training"]\n'
        "where = \"stage = 'ingest' AND run_id = 'x'\"\n"
        'fine = [event for event in events if event.stage == "train_sae"]\n'
    )
    assert stage_names_written_out(module) == ["module.py:1", "module.py:2", "module.py:3"]


def test_the_code_names_stages_by_the_registrys_constants() -> None:
    sources = [*CORE.rglob("*.py"), *(CORE.parent / "ui").glob("*.py"), *(CORE.parent / "pages").glob("*.py")]
    written_out = [where for path in sources for where in stage_names_written_out(path)]
    assert len(sources) > 100 and not written_out, written_out
