"""A saved SAE read as numpy arrays: what showing a run needs (feature directions, the codes of a new text) without
torch, so the app's server does not import torch (about 180 MB resident) just to show a run. Never pickle."""

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from safetensors import SafetensorError
from safetensors.numpy import load

from prisma_core.errors import PrismaError, WeightsError
from prisma_core.sae.config import SAEConfig
from prisma_core.store.location import Location
from prisma_core.store.vectors import unit_rows

WEIGHTS_FILE = "sae.safetensors"
CONFIG_FILE = "config.json"
FORMAT = "prisma-topk-sae"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class SAEWeights:
    """The parameters of a TopK SAE (see sae/model.py for their meaning), float32, latent-major."""

    config: SAEConfig
    b_pre: np.ndarray  # [d]
    W_enc: np.ndarray  # [n_latents, d]
    b_enc: np.ndarray  # [n_latents]
    W_dec: np.ndarray  # [n_latents, d]

    @property
    def n_latents(self) -> int:
        return len(self.W_dec)

    def tensors(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in PARAMETERS}

    def decoder_directions(self) -> np.ndarray:
        """Unit-norm feature directions [n_latents, d] (row i = feature i)."""
        return unit_rows(self.W_dec)

    def feature_codes(self, vectors: np.ndarray) -> sp.csr_matrix:
        """Sparse codes [n, n_latents] of embeddings [n, d]: the k largest of ReLU(W_enc (x - b_pre) + b_enc)."""
        pre = np.asarray(vectors, np.float32) @ self.W_enc.T + (self.b_enc - self.W_enc @ self.b_pre)
        np.maximum(pre, 0, out=pre)
        top = np.argpartition(-pre, self.config.k - 1, axis=1)[:, : self.config.k]
        return codes_matrix(np.take_along_axis(pre, top, axis=1), top, self.n_latents)


PARAMETERS = ("b_pre", "W_enc", "b_enc", "W_dec")


def parameter_shapes(d: int, n_latents: int) -> dict[str, tuple[int, ...]]:
    return dict(zip(PARAMETERS, [(d,), (n_latents, d), (n_latents,), (n_latents, d)], strict=True))


def codes_matrix(values: np.ndarray, indices: np.ndarray, n_features: int) -> sp.csr_matrix:
    """Top-k codes ([n, k] values and feature indices) as a sparse [n, n_features] matrix; zeros dropped."""
    n_docs, k = values.shape
    matrix = sp.csr_matrix(
        (values.ravel(), indices.ravel(), np.arange(0, n_docs * k + 1, k)),
        shape=(n_docs, n_features),
    )
    matrix.eliminate_zeros()
    matrix.sort_indices()
    return matrix


def read_weights(directory: str | Path | Location) -> SAEWeights:
    """Read an SAE written by `save_sae` from a local folder, an s3:// URI (reached with the environment's settings)
    or a `Location`. Raises WeightsError for missing, corrupted, foreign or wrongly shaped files."""
    directory = Location.of(directory)
    d, n_latents, config = _read_config(directory / CONFIG_FILE)
    path = directory / WEIGHTS_FILE
    tensors = _read_tensors(path)
    expected = parameter_shapes(d, n_latents)
    found = {name: tensor.shape for name, tensor in tensors.items()}
    if set(found) != set(expected):
        raise WeightsError(f"{path} is not a Prisma SAE: it holds {sorted(found)}, expected {sorted(expected)}.")
    wrong = [name for name, shape in expected.items() if found[name] != shape]
    if wrong:
        details = "; ".join(f"{name} is {list(found[name])}, expected {list(expected[name])}" for name in wrong)
        raise WeightsError(f"{path} does not match its config.json: {details}.")
    if not all(np.issubdtype(t.dtype, np.floating) and np.isfinite(t).all() for t in tensors.values()):
        raise WeightsError(f"{path} holds non-numeric, NaN or infinite weights.")
    return SAEWeights(config, **{name: tensor.astype(np.float32, copy=False) for name, tensor in tensors.items()})


def _read_config(path: Location) -> tuple[int, int, SAEConfig]:
    """config.json -> (d, n_latents, SAEConfig)."""
    if not path.is_file():
        raise WeightsError(f"No SAE settings found at {path}; the SAE was never saved there or its save was cut short.")
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise WeightsError(f"{path} is unreadable or corrupted ({error}).") from error
    if not isinstance(record, dict) or record.pop("format", None) != FORMAT:
        raise WeightsError(f"{path} does not describe a Prisma SAE.")
    record.pop("format_version", None)
    d, n_latents = record.pop("d", None), record.pop("n_latents", None)
    try:
        config = SAEConfig.from_dict(record, d if isinstance(d, int) else None)
    except (PrismaError, TypeError) as error:
        raise WeightsError(f"{path} holds invalid SAE settings: {error}") from error
    if not isinstance(d, int) or not isinstance(n_latents, int) or d < 1 or not 0 < n_latents <= config.n_features:
        raise WeightsError(f"{path} gives inconsistent sizes (d={d}, n_latents={n_latents}).")
    if config.k > n_latents:
        raise WeightsError(f"{path} asks for k={config.k} active features out of only {n_latents}.")
    return d, n_latents, config


def _read_tensors(path: Location) -> dict[str, np.ndarray]:
    if not path.is_file():
        raise WeightsError(f"No SAE weights found at {path}.")
    try:
        return load(path.read_bytes())
    except (SafetensorError, OSError, ValueError, TypeError) as error:  # TypeError: a dtype numpy lacks (bf16)
        raise WeightsError(f"{path} is corrupted or not a safetensors file ({error}).") from error
