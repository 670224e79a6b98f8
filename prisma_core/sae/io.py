"""SAE weights in a folder (local or in the workspace's object store): `sae.safetensors` next to the
`config.json` that made them. Never pickle."""

import json
from pathlib import Path
from typing import TypeVar

import torch
from safetensors import SafetensorError
from safetensors.torch import load, save

from prisma_core.errors import PrismaError, WeightsError
from prisma_core.sae.config import SAEConfig
from prisma_core.sae.model import TopKSAE
from prisma_core.sae.train import TrainResult
from prisma_core.store.location import Location

WEIGHTS_FILE = "sae.safetensors"
CONFIG_FILE = "config.json"
FORMAT = "prisma-topk-sae"
FORMAT_VERSION = 1

Folder = TypeVar("Folder", str, Path, Location)


def save_sae(result_or_model: TrainResult | TopKSAE, config: SAEConfig, directory: Folder) -> Folder:
    """Write directory/sae.safetensors, then directory/config.json (config plus d and n_latents); returns directory.

    `directory`: a local folder, or a `Location` (e.g. a run folder in the workspace's object store). The config is
    written last, so a directory without one holds an interrupted save.
    """
    model = result_or_model.model if isinstance(result_or_model, TrainResult) else result_or_model
    if config.k != model.k or config.n_latents(model.d) != model.n_latents:
        raise WeightsError(
            f"The settings (k={config.k}, {config.n_latents(model.d)} features) do not describe this SAE "
            f"(k={model.k}, {model.n_latents} features); save it with the config it was trained with."
        )
    tensors = {name: tensor.detach().cpu().contiguous() for name, tensor in model.state_dict().items()}
    record = {"format": FORMAT, "format_version": FORMAT_VERSION, "d": model.d, "n_latents": model.n_latents}
    folder = Location.of(directory)
    try:
        folder.make_folder()
        (folder / WEIGHTS_FILE).write_bytes(save(tensors, metadata={"format": FORMAT}))
        (folder / CONFIG_FILE).write_text(json.dumps(record | config.to_dict(), indent=2))
    except (OSError, SafetensorError) as error:  # safetensors reports a failed serialization as SafetensorError
        reason = getattr(error, "strerror", None) or str(error).removeprefix("Error while serializing: ")
        raise WeightsError(f"Could not write the SAE to {folder}: {reason}.") from error
    return directory


def load_sae(directory: str | Path | Location) -> tuple[TopKSAE, SAEConfig]:
    """Read an SAE written by `save_sae` (on CPU) from a local folder, an s3:// URI (reached with the environment's
    settings) or a `Location`. Raises WeightsError for missing, corrupted, foreign or wrongly shaped files."""
    directory = Location.of(directory)
    d, n_latents, config = _read_config(directory / CONFIG_FILE)
    tensors = _read_weights(directory / WEIGHTS_FILE)
    model = TopKSAE(d, n_latents, config.k)
    expected = {name: tuple(tensor.shape) for name, tensor in model.state_dict().items()}
    found = {name: tuple(tensor.shape) for name, tensor in tensors.items()}
    if set(found) != set(expected):
        raise WeightsError(
            f"{directory / WEIGHTS_FILE} is not a Prisma SAE: it holds {sorted(found)}, expected {sorted(expected)}."
        )
    wrong = [name for name, shape in expected.items() if found[name] != shape]
    if wrong:
        details = "; ".join(f"{name} is {list(found[name])}, expected {list(expected[name])}" for name in wrong)
        raise WeightsError(f"{directory / WEIGHTS_FILE} does not match its config.json: {details}.")
    if not all(tensor.is_floating_point() and torch.isfinite(tensor).all() for tensor in tensors.values()):
        raise WeightsError(f"{directory / WEIGHTS_FILE} holds non-numeric, NaN or infinite weights.")
    model.load_state_dict({name: tensor.float() for name, tensor in tensors.items()})
    return model, config


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
        config = SAEConfig.from_dict(record)
    except (PrismaError, TypeError) as error:
        raise WeightsError(f"{path} holds invalid SAE settings: {error}") from error
    if not isinstance(d, int) or not isinstance(n_latents, int) or d < 1 or config.n_latents(d) != n_latents:
        raise WeightsError(f"{path} gives inconsistent sizes (d={d}, n_latents={n_latents}).")
    if config.k > n_latents:
        raise WeightsError(f"{path} asks for k={config.k} active features out of only {n_latents}.")
    return d, n_latents, config


def _read_weights(path: Location) -> dict[str, torch.Tensor]:
    if not path.is_file():
        raise WeightsError(f"No SAE weights found at {path}.")
    try:
        return load(path.read_bytes())
    except (SafetensorError, OSError, ValueError) as error:
        raise WeightsError(f"{path} is corrupted or not a safetensors file ({error}).") from error
