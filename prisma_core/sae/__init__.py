"""TopK sparse autoencoder with AuxK: configure, train, encode, save and load.

The settings (`config`) import without torch; the model, its training and its files import torch on first use
(`from prisma_core.sae import train_sae` still works), so commands that only read settings stay light.
"""

import importlib
from typing import TYPE_CHECKING, Any

from prisma_core.sae.config import SAEConfig, check_config, suggest_config

if TYPE_CHECKING:
    from prisma_core.sae.io import load_sae, save_sae
    from prisma_core.sae.loss import fvu, topk_aux_loss
    from prisma_core.sae.model import SAEOutput, TopKSAE
    from prisma_core.sae.train import TrainResult, codes_matrix, encode, feature_codes, resolve_device, train_sae

_NEEDS_TORCH = {
    "load_sae": "io",
    "save_sae": "io",
    "fvu": "loss",
    "topk_aux_loss": "loss",
    "SAEOutput": "model",
    "TopKSAE": "model",
    "TrainResult": "train",
    "encode": "train",
    "codes_matrix": "train",
    "feature_codes": "train",
    "resolve_device": "train",
    "train_sae": "train",
}
"""Name -> the module (importing torch) that defines it, imported when the name is first used."""


def __getattr__(name: str) -> Any:
    if name in _NEEDS_TORCH:
        return getattr(importlib.import_module(f"prisma_core.sae.{_NEEDS_TORCH[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "SAEConfig",
    "SAEOutput",
    "TopKSAE",
    "TrainResult",
    "check_config",
    "codes_matrix",
    "encode",
    "feature_codes",
    "fvu",
    "load_sae",
    "resolve_device",
    "save_sae",
    "suggest_config",
    "topk_aux_loss",
    "train_sae",
]
