"""Every stage the core reports progress under has a plain name on a job's panel (`ui.progress.STAGE_NAMES`): the
stage names are read from the core's source, wherever it reports progress."""

import ast
from collections.abc import Iterator
from pathlib import Path

import prisma_core
from ui.progress import STAGE_NAMES

CORE = Path(prisma_core.__file__).resolve().parent
REPORTERS = {"Progress": 0, "Batch": 0, "GroupTable": 1}
"""What the core reports progress through, and which argument is the stage: a progress event, a labelling batch
(`pipeline.labelling.job.Batch`), a kind of group labelled in batches (`pipeline.labelling.storing.GroupTable`)."""


def module_constants(tree: ast.Module) -> dict[str, str]:
    """The module's top-level string constants (STAGE = "themes")."""
    return {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def reported_stages(tree: ast.Module) -> Iterator[str]:
    """The stage names a module reports: a string, or a module constant; a stage passed on (update.stage, a
    parameter) is reported where it was named."""
    constants = module_constants(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.func.id not in REPORTERS:
            continue
        index = REPORTERS[node.func.id]
        if len(node.args) <= index:
            continue
        stage = node.args[index]
        if isinstance(stage, ast.Constant) and isinstance(stage.value, str):
            yield stage.value
        elif isinstance(stage, ast.Name) and stage.id in constants:
            yield constants[stage.id]


def core_stages() -> set[str]:
    return {
        stage for path in CORE.rglob("*.py") for stage in reported_stages(ast.parse(path.read_text(encoding="utf-8")))
    }


def test_the_scan_finds_the_stages_of_every_kind_of_report() -> None:
    stages = core_stages()
    assert {"ingest", "check", "embed", "train_sae", "themes", "families", "demo", "map", "place"} <= stages
    assert {"label", "detection", "embedding scores", "family labels", "theme labels"} <= stages


def test_every_stage_the_core_reports_has_a_plain_name() -> None:
    missing = core_stages() - STAGE_NAMES.keys()
    assert not missing, f"shown raw on a job's panel: {sorted(missing)}"
    assert all(name[0].isupper() and "_" not in name for name in STAGE_NAMES.values())
