"""The one registry of embedding backends: name -> the module that builds its `Embedder` (`load_embedder(config)`),
imported only when a config chooses it (openvino is an optional package; a process reading cached vectors imports
none), and what its vector space is named by.

Adding a backend is one module with `load_embedder(config) -> Embedder` (embed/embedder.py) and one line here.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Backend:
    module: str  # the module whose `load_embedder(config)` builds the backend's Embedder
    runs_here: bool  # a model run on this machine (device and precision apply); False: a server computes the vectors
    space_tag: str  # its part of the vector space's name (`model_key`)


BACKENDS: dict[str, Backend] = {
    "torch": Backend("prisma_core.embed.torch_backend", runs_here=True, space_tag=""),
    "openvino": Backend("prisma_core.embed.openvino_backend", runs_here=True, space_tag="openvino-"),
    "ollama": Backend("prisma_core.embed.ollama_backend", runs_here=False, space_tag="ollama"),
}

BACKEND_CHOICES = ("auto", *BACKENDS)
"""What the `backend` setting accepts: auto (the fastest backend that runs here), or a backend by name."""
