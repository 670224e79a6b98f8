"""The torch embedding backend: the sentence-transformers model itself, on its device and precision."""

from __future__ import annotations

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from prisma_core.embed.config import EmbedConfig
from prisma_core.embed.embedder import LocalEmbedder
from prisma_core.embed.model import (
    MAX_BATCH_TOKENS,
    EncoderSpec,
    Pooled,
    Pooler,
    describe,
    gpu_batch_tokens,
    load_model,
    span_means,
)


def torch_pooler(encoder: SentenceTransformer) -> Pooler:
    """Pools windows with the sentence-transformers model itself, on its device and dtype; its token embeddings
    (returned beside the sentence embedding by the same forward pass) give the span means."""

    def pool(batch_ids: list[list[int]], spans: np.ndarray | None = None) -> Pooled:
        features = encoder.tokenizer.pad({"input_ids": batch_ids}, padding=True, return_tensors="pt")
        with torch.inference_mode():
            pooled = encoder({name: tensor.to(encoder.device) for name, tensor in features.items()})
        sentences = pooled["sentence_embedding"].float().cpu().numpy()
        if spans is None:  # the token embeddings stay on the device
            return Pooled(sentences, np.zeros((0, sentences.shape[1]), np.float32))
        return Pooled(sentences, span_means(pooled["token_embeddings"].float().cpu().numpy(), spans))

    return pool


def load_encoder(config: EmbedConfig) -> tuple[EncoderSpec, Pooler]:
    """The model on the configured device and precision, described, and its pooler."""
    encoder = load_model(config.model, config.device, config.precision)
    return describe(encoder), torch_pooler(encoder)


def load_embedder(config: EmbedConfig) -> LocalEmbedder:
    """The backend's `Embedder` (embed/backends.py): the model described, its pooler and, on a GPU, batches sized to
    the memory it has free."""
    encoder = load_model(config.model, config.device, config.precision)
    spec = describe(encoder)
    return LocalEmbedder(spec, torch_pooler(encoder), _batch_tokens(encoder, spec))


def _batch_tokens(encoder: SentenceTransformer, spec: EncoderSpec) -> int:
    if encoder.device.type != "cuda":
        return MAX_BATCH_TOKENS
    free_bytes, _ = torch.cuda.mem_get_info(encoder.device)
    return gpu_batch_tokens(free_bytes, spec.dimension)
