"""SAE weights in a folder (local or in the workspace's object store): `sae.safetensors` next to the
`config.json` that made them, written from and read into a torch model (sae/weights.py reads them without torch).
Never pickle."""

import json
from pathlib import Path
from typing import TypeVar

import torch
from safetensors import SafetensorError
from safetensors.torch import save

from prisma_core.errors import WeightsError
from prisma_core.sae.config import SAEConfig
from prisma_core.sae.model import TopKSAE
from prisma_core.sae.train import TrainResult
from prisma_core.sae.weights import CONFIG_FILE, FORMAT, FORMAT_VERSION, WEIGHTS_FILE, read_weights
from prisma_core.store.location import Location

Folder = TypeVar("Folder", str, Path, Location)


def save_sae(result_or_model: TrainResult | TopKSAE, config: SAEConfig, directory: Folder) -> Folder:
    """Write directory/sae.safetensors, then directory/config.json (config plus d and n_latents); returns directory.

    `directory`: a local folder, or a `Location` (e.g. a run folder in the workspace's object store). The config is
    written last, so a directory without one holds an interrupted save.
    """
    model = result_or_model.model if isinstance(result_or_model, TrainResult) else result_or_model
    if config.k != model.k or model.n_latents > config.n_features:
        raise WeightsError(
            f"The settings (k={config.k}, {config.n_features} features) do not describe this SAE "
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
    """Read an SAE written by `save_sae` (on CPU) as a torch model; see `read_weights` for where it can be and what
    it refuses."""
    weights = read_weights(directory)
    model = TopKSAE(weights.W_dec.shape[1], weights.n_latents, weights.config.k)
    model.load_state_dict({name: torch.from_numpy(array) for name, array in weights.tensors().items()})
    return model, weights.config
