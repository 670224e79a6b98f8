"""Whether `auto` embeds at int8 on this machine: only where the int8 model's check (embed/quantize.py, measured once
per machine and kept in the model's cache folder) shows document vectors close enough to fp32 and a model faster
than the one it replaces (bf16 where the CPU has it natively, else fp32). Reading a kept check imports neither
openvino nor torch; only a machine without one quantizes the model (through the OpenVINO backend) to measure it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from prisma_core.embed.config import COSINE_FLOOR, EmbedConfig
from prisma_core.embed.model import check_model_available
from prisma_core.embed.openvino_cache import cache_key, cache_root
from prisma_core.embed.quantize import CHECK_FILE, Int8Check
from prisma_core.errors import EmbeddingError

logger = logging.getLogger(__name__)

MIN_MEAN_COSINE = 0.99
"""int8 document vectors must keep at least this mean cosine to the fp32 ones ..."""
MIN_COSINE = COSINE_FLOOR
"""... and at least this cosine for every checked document."""

_reported: set[tuple[str, float, float]] = set()


def check_folder(model: str) -> Path:
    return cache_root() / cache_key(model, "int8")


def int8_check(model: str) -> Int8Check | None:
    """The int8 model's check on this machine: read from its cache folder, else measured now by quantizing the model
    (once per machine; the model is then compiled and ready for this process). None when the model cannot be
    loaded (a model neither here nor downloadable is found out before any conversion starts) or no cache could keep
    the check."""
    path = check_folder(model) / CHECK_FILE
    if not path.is_file():
        from prisma_core.embed import openvino_backend  # imports openvino: only when there is no check to read

        try:
            check_model_available(model)
            openvino_backend.load_encoder(EmbedConfig(model=model, precision="int8", backend="openvino"))
        except EmbeddingError as error:  # a model that cannot load: the embedding itself will say why
            logger.warning("No int8 model of %s: %s", model, error)
            return None
    try:
        return Int8Check(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def auto_int8(model: str, min_mean_cosine: float | None = None, min_cosine: float | None = None) -> bool:
    """Whether `auto` embeds at int8: only when the int8 model's check passes the thresholds (MIN_MEAN_COSINE and
    MIN_COSINE unless given). When it does not, says why in the log, once per process."""
    thresholds = (
        MIN_MEAN_COSINE if min_mean_cosine is None else min_mean_cosine,
        MIN_COSINE if min_cosine is None else min_cosine,
    )
    check = int8_check(model)
    failure = (
        f"no accuracy check: the model could not be quantized, or its check kept in {check_folder(model)}"
        if check is None
        else check.failure(*thresholds)
    )
    if failure is not None and (model, *thresholds) not in _reported:
        _reported.add((model, *thresholds))
        logger.warning("int8 embedding not used for %s (%s): staying at bf16 or fp32", model, failure)
    return failure is None
