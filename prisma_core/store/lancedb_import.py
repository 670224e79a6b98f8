"""LanceDB imported without the REST client of Lance namespaces, which a workspace never uses.

`import lancedb` imports `lance_namespace`, which takes its request and response types from the package
`lance_namespace_urllib3_client`. Python runs that package's `__init__` first, and it imports the whole REST client
(every API class, each method wrapped by pydantic): 0.7 s of an idle 2-core machine and 1.6 to 3.1 s under load, most
of LanceDB's import and a seventh of the app's first view of a run (BENCHMARKS.md, section 11). A workspace opens a
local folder or an object store, never a REST namespace. So the package is registered without running its
`__init__`: its `models` subpackage, which `lance_namespace` needs, imports as usual, and the first use of anything
else of the package (a REST namespace, should a future LanceDB need one) runs the `__init__` then, and works.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from typing import Any

REST_CLIENT = "lance_namespace_urllib3_client"


class _DeferredPackage(types.ModuleType):
    """A package whose `__init__` runs on the first lookup of a name it would define."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # import machinery probing (__path__ is set, __file__ too): nothing to run
            raise AttributeError(name)
        self.__class__ = types.ModuleType
        self.__spec__.loader.exec_module(self)
        return getattr(self, name)


def defer_rest_client() -> None:
    """Register the REST client's package without running its `__init__` (see the module docstring)."""
    if REST_CLIENT in sys.modules:
        return
    spec = importlib.util.find_spec(REST_CLIENT)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return  # another LanceDB without it: nothing to defer
    package = importlib.util.module_from_spec(spec)
    package.__class__ = _DeferredPackage
    sys.modules[REST_CLIENT] = package


def import_lancedb() -> types.ModuleType:
    defer_rest_client()
    import lancedb

    return lancedb
