"""The torch embedding backend: the sentence-transformers model itself, on its device and precision."""

from __future__ import annotations

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from prisma_core.embed.config import EmbedConfig
from prisma_core.embed.model import Encoder, Pooler, load_model


def torch_pooler(encoder: SentenceTransformer) -> Pooler:
    """Pools windows with the sentence-transformers model itself, on its device and dtype."""

    def pool(batch_ids: list[list[int]]) -> np.ndarray:
        features = encoder.tokenizer.pad({"input_ids": batch_ids}, padding=True, return_tensors="pt")
        with torch.inference_mode():
            pooled = encoder({name: tensor.to(encoder.device) for name, tensor in features.items()})
        return pooled["sentence_embedding"].float().cpu().numpy()

    return pool


def load_encoder(config: EmbedConfig) -> tuple[Encoder, Pooler]:
    """The model on the configured device and precision, and its pooler."""
    encoder = load_model(config.model, config.device, config.precision)
    return encoder, torch_pooler(encoder)
