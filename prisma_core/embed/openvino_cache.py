"""Where the OpenVINO backend keeps converted (and quantized) models, and the name of each one's folder. Importing
this module imports neither openvino nor torch, so `auto` can find out what is cached without loading either."""

from __future__ import annotations

import hashlib
import json
import os
import re
from importlib import metadata
from pathlib import Path

from prisma_core.embed.model import resolve_model_path
from prisma_core.embed.quantize import QUANTIZATION_RECIPE

__all__ = ["CACHE_ENV", "cache_key", "cache_root"]

CACHE_ENV = "PRISMA_CACHE_DIR"
CACHE_FORMAT = 4
"""Bumped when what a cache folder holds changes, so older folders are never read (4: the graph's second output, the
token embeddings passages are pooled from, and how the model pools in encoder.json; older folders are converted
again, once)."""
KEYED_PACKAGES = ("openvino", "torch", "transformers", "sentence-transformers")
"""Library versions in the cache key: a new version of any of them converts again."""
QUANTIZER_PACKAGES = ("nncf",)
"""Also in the key of int8 models: a new version quantizes again."""


def cache_root() -> Path:
    """Where converted models are kept: `$PRISMA_CACHE_DIR/openvino`, else `$XDG_CACHE_HOME/prisma/openvino`
    (`~/.cache/prisma/openvino`). Deleting the folder is always safe: the next process converts again."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit) / "openvino"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "prisma" / "openvino"


def _package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"


def _files_of(path: str) -> list[tuple[str, int, int]]:
    """(name, size, mtime) of a local model folder's files, so a model changed in place is converted again."""
    folder = Path(path)
    if not folder.is_dir():
        return []
    return sorted(
        (str(file.relative_to(folder)), file.stat().st_size, file.stat().st_mtime_ns)
        for file in folder.rglob("*")
        if file.is_file()
    )


def _keyed_packages(precision: str) -> tuple[str, ...]:
    return KEYED_PACKAGES + (QUANTIZER_PACKAGES if precision == "int8" else ())


def cache_key(model: str, precision: str) -> str:
    """The cache folder's name: readable model and precision, then a hash of everything the conversion depends on."""
    path = resolve_model_path(model)
    described = {
        "format": CACHE_FORMAT,
        "model": model,
        "path": str(Path(path).resolve()) if Path(path).exists() else path,
        "files": _files_of(path),
        "precision": precision,
        "versions": {name: _package_version(name) for name in _keyed_packages(precision)},
    }
    if precision == "int8":  # a model quantized another way is quantized again
        described["quantization"] = QUANTIZATION_RECIPE
    digest = hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:16]
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", Path(model).name or model).strip("-")[-48:] or "model"
    return f"{slug}-{precision}-{digest}"
