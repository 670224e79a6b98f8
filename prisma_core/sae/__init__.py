"""TopK sparse autoencoder with AuxK: configure, train, encode, save and load.

The settings (`config`) import at once; the stored weights as numpy arrays (`weights`: what showing a run needs,
without torch), the model, its training and its files on first use (`from prisma_core.sae import train_sae` still
works), so commands that only read settings stay light.
"""

import importlib
from typing import TYPE_CHECKING, Any

from prisma_core.sae.config import SAEConfig, check_config, suggest_config

if TYPE_CHECKING:
    from prisma_core.sae.io import load_sae, save_sae
    from prisma_core.sae.loss import fvu, topk_aux_loss
    from prisma_core.sae.model import SAEOutput, TopKSAE
    from prisma_core.sae.stream import VectorSource, train_from
    from prisma_core.sae.train import PassageRows, TrainResult, encode, feature_codes, resolve_device, train_sae
    from prisma_core.sae.weights import SAEWeights, codes_matrix, read_weights

_LAZY = {
    "load_sae": "io",
    "save_sae": "io",
    "fvu": "loss",
    "topk_aux_loss": "loss",
    "SAEOutput": "model",
    "TopKSAE": "model",
    "VectorSource": "stream",
    "train_from": "stream",
    "PassageRows": "train",
    "TrainResult": "train",
    "encode": "train",
    "feature_codes": "train",
    "resolve_device": "train",
    "train_sae": "train",
    "SAEWeights": "weights",
    "codes_matrix": "weights",
    "read_weights": "weights",
}
"""Name -> the module that defines it, imported when the name is first used: all but `weights` import torch, and
`weights` imports scipy and the store."""


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"prisma_core.sae.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "PassageRows",
    "SAEConfig",
    "SAEOutput",
    "SAEWeights",
    "TopKSAE",
    "TrainResult",
    "VectorSource",
    "check_config",
    "codes_matrix",
    "encode",
    "feature_codes",
    "fvu",
    "load_sae",
    "read_weights",
    "resolve_device",
    "save_sae",
    "suggest_config",
    "topk_aux_loss",
    "train_from",
    "train_sae",
]
