"""Form help texts come from the config dataclasses themselves, so each setting is documented once (in the core)."""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import textwrap


@functools.cache
def field_help(config_type: type) -> dict[str, str]:
    """Field name -> the docstring written under it in the dataclass body (empty when there is none)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(config_type)))
    body = next(node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)).body
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
