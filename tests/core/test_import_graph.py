"""The imports of the core, the app's helpers (`ui/`), its pages and `app.py` have no cycles (docs/code-map.md):
each module's imports, read from its source, form a graph without a loop, so every module can be read, tested and
imported after the modules it uses. The app and the command line enter the core only through `prisma_core.pipeline`,
and the core's packages stack in layers below it.

An import counts wherever it is written: at the top, inside a function (deferred to keep heavy libraries out of
processes that do not need them) or only for type checkers (`if TYPE_CHECKING:`). `from package import
name` imports the submodule `package.name` when there is one, else the package itself; a submodule's implicit import
of its parent package is not counted (every submodule has it).
"""

import ast
from collections.abc import Iterator
from pathlib import Path

import networkx as nx

from prisma_core import embed

CORE = Path(embed.__file__).resolve().parents[1]
REPO = CORE.parent
SOURCES = [*sorted(CORE.rglob("*.py")), *sorted((REPO / "ui").glob("*.py")), *sorted((REPO / "pages").glob("*.py"))]
REGISTERED = {"prisma_core.embed": {backend.module for backend in embed.BACKENDS.values()}}
"""Imports made by name at run time (importlib): the embedding package imports the backend a config chooses
(`embed.backends.BACKENDS`)."""


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in [*SOURCES, REPO / "app.py"]}


def is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def import_statements(tree: ast.AST, type_only: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement under `tree`, those in `if TYPE_CHECKING:` blocks only when `type_only`."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        elif type_only or not is_type_checking_block(child):
            yield from import_statements(child, type_only)


def imported_names(module: str, statement: ast.Import | ast.ImportFrom) -> Iterator[str]:
    if isinstance(statement, ast.Import):
        yield from (alias.name for alias in statement.names)
        return
    package = module if MODULES[module].stem == "__init__" else module.rpartition(".")[0]
    base = statement.module or ""
    if statement.level:
        anchor = package.split(".")[: len(package.split(".")) - statement.level + 1]
        base = ".".join([*anchor, base] if base else anchor)
    for alias in statement.names:
        yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base


def known_module(name: str) -> str | None:
    """The module of the core, `ui/`, `pages/` or `app.py` that importing `name` runs (a name inside a module: that
    module); None outside them."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(type_only: bool) -> nx.DiGraph:
    """module -> each module of the core, `ui/`, `pages/` or `app.py` it imports."""
    graph = nx.DiGraph()
    for module, path in MODULES.items():
        graph.add_node(module)
        for statement in import_statements(ast.parse(path.read_text(encoding="utf-8")), type_only):
            for name in imported_names(module, statement):
                target = known_module(name)
                if target is not None and target != module:
                    graph.add_edge(module, target)
        graph.add_edges_from((module, target) for target in REGISTERED.get(module, ()))
    return graph


def test_the_graph_sees_top_level_deferred_and_registered_imports() -> None:
    graph = import_graph(type_only=True)
    assert graph.has_edge("prisma_core.embed.openvino_backend", "prisma_core.embed.openvino_runtime")  # at the top
    assert graph.has_edge("prisma_core.embed", "prisma_core.embed.int8_choice")  # in a function
    assert graph.has_edge("prisma_core.embed", "prisma_core.embed.openvino_backend")  # by name, through BACKENDS
    assert graph.has_edge("prisma_core.embed.cache", "prisma_core.embed")  # a name the package itself defines
    assert graph.has_edge("prisma_core.pipeline.training", "prisma_core.sae.model")  # for type checkers only
    assert not import_graph(type_only=False).has_edge("prisma_core.pipeline.training", "prisma_core.sae.model")


def test_the_embedding_package_has_no_import_cycle() -> None:
    graph = import_graph(type_only=True)
    package = graph.subgraph(module for module in graph if module.split(".")[:2] == ["prisma_core", "embed"])
    cycles = list(nx.simple_cycles(package))
    assert len(package) >= 10 and not cycles, cycles


def test_the_graph_sees_the_app_its_pages_and_their_imports_in_functions() -> None:
    graph = import_graph(type_only=True)
    assert graph.has_edge("app", "ui.navigation")
    assert graph.has_edge("pages.home", "prisma_core.pipeline.demo")
    assert graph.has_edge("ui.gates", "prisma_core.pipeline.demo")  # in a function
    assert graph.has_edge("prisma_core.cli.run_commands", "prisma_core.pipeline.report.writer")  # in a function


def test_nothing_has_an_import_cycle_even_counting_imports_in_functions_and_for_type_checkers() -> None:
    graph = import_graph(type_only=True)
    cycles = list(nx.simple_cycles(graph))
    assert {"app", "pages.train", "ui.state", "prisma_core.pipeline"} <= set(graph) and not cycles, cycles


def within(module: str, *packages: str) -> bool:
    return any(module == package or module.startswith(f"{package}.") for package in packages)


DOOR = "prisma_core.pipeline"
COMMAND_LINE = ("prisma_core.cli", "prisma_core.__main__")


def test_the_app_and_the_command_line_enter_the_core_only_through_the_pipeline() -> None:
    """`ui/`, `pages/` and `app.py` import `prisma_core.pipeline` and its modules, nothing else of the core; the
    command line likewise, besides its own modules."""
    graph = import_graph(type_only=True)
    allowed = {
        caller: (DOOR, *COMMAND_LINE) if within(caller, *COMMAND_LINE) else (DOOR,)
        for caller in graph
        if within(caller, "ui", "pages", "app", *COMMAND_LINE)
    }
    around = [
        (caller, target)
        for caller, doors in allowed.items()
        for target in graph.successors(caller)
        if within(target, "prisma_core") and not within(target, *doors)
    ]
    assert len(allowed) >= 40 and not around, around


def layer(module: str) -> str:
    """A module's unit of the core's layers: its package or top-level module; each module of the pipeline (which
    chains the stages, some over others) on its own."""
    parts = module.split(".")
    return ".".join(parts[:3] if parts[1:2] == ["pipeline"] else parts[:2])


def test_the_cores_packages_stack_in_layers_with_the_pipeline_on_top() -> None:
    """No import climbs a layer: the packages and top-level modules of the core import each other without a cycle,
    and nothing below the pipeline imports it (only the pipeline and the command line do)."""
    graph = import_graph(type_only=True).subgraph(module for module in MODULES if within(module, "prisma_core"))
    layers = nx.DiGraph((layer(a), layer(b)) for a, b in graph.edges if layer(a) != layer(b))
    cycles = list(nx.simple_cycles(layers))
    assert {"prisma_core.interpret", "prisma_core.reading", "prisma_core.curation", "prisma_core.run_shape"} <= set(
        layers
    ) and not cycles, cycles
    upward = [(a, b) for a, b in graph.edges if within(b, DOOR) and not within(a, DOOR, *COMMAND_LINE)]
    assert not upward, upward


def test_the_read_model_shape_lies_below_the_edits_and_the_runs() -> None:
    """`edits` names `LoadedRun` and `runs` applies the edits: the shape both share sits below them."""
    graph = import_graph(type_only=True)
    assert graph.has_edge("prisma_core.curation.edits", "prisma_core.run_shape.loaded_run")
    assert graph.has_edge("prisma_core.reading.runs", "prisma_core.curation.applied_edits")
    assert not nx.has_path(graph, "prisma_core.curation.edits", "prisma_core.reading.runs")
