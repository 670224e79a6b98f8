"""Help texts for every stage setting, read from the docstring written under each field of its config dataclass.

The configs are documented once, field by field; the command line's `--help` and the app's form help both come
from here, so a setting's explanation never drifts between them.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import sys
import threading
from pathlib import Path

_LOCK = threading.Lock()


@functools.cache
def _module_tree(path: str) -> ast.Module:
    return ast.parse(Path(path).read_text(encoding="utf-8"))


def field_docs(config_type: type) -> dict[str, str]:
    """Field name -> the docstring under it in the dataclass body ("" when there is none), whitespace folded.

    The source file is read directly rather than through `inspect.getsource`, whose shared line cache is not
    safe when several app sessions render pages at the same moment.
    """
    if not dataclasses.is_dataclass(config_type):
        raise TypeError(f"{config_type!r} is not a dataclass")
    with _LOCK:
        tree = _module_tree(inspect.getfile(sys.modules[config_type.__module__]))
    body = next(
        node.body for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and node.name == config_type.__name__
    )
    docs: dict[str, str] = {}
    for statement, following in zip(body, [*body[1:], None], strict=True):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[statement.target.id] = " ".join(following.value.value.split())
    return {field.name: docs.get(field.name, "") for field in dataclasses.fields(config_type)}
