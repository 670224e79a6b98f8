"""TopK sparse autoencoder with AuxK: configure, train, encode, save and load."""

from prisma_core.sae.config import SAEConfig, check_config, suggest_config
from prisma_core.sae.io import load_sae, save_sae
from prisma_core.sae.loss import fvu, topk_aux_loss
from prisma_core.sae.model import SAEOutput, TopKSAE
from prisma_core.sae.train import TrainResult, codes_matrix, encode, feature_codes, resolve_device, train_sae

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
