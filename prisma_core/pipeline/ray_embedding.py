"""Embedding on a Ray cluster: the texts still to embed go through a Ray Data job whose workers (actors) each load the
model once and run the same chunk-and-average code as this machine (`embed_documents`); the vectors come back block
by block and are stored a slice at a time, so progress, interruption and resuming work as they do locally. The
workers compute no passages: `pipeline.passages` computes a document's on this machine when they are first asked for
(and stores them), so a cluster never sends back the token-level data.

Only `pipeline.embed_dataset` imports this module, and only when a Ray address is given: ray stays an optional
package (`pip install "ray[data]"`). The workers compute exactly the vector space this machine names (model_key): the
backend and the precision are resolved here and handed to them; the cluster's GPUs are used when that vector space
runs on them (the torch backend).
"""

from __future__ import annotations

import functools
import logging
import math
import re
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd

import prisma_core
from prisma_core.embed import EmbedConfig, embed_documents, load_embedder, resolve_backend, resolve_config_precision
from prisma_core.errors import EmbeddingError
from prisma_core.pipeline.slices import ComputedSlice, ComputeSlices, report_documents
from prisma_core.progress import ProgressCallback

CPUS_PER_WORKER = 4
"""CPUs per worker when the number of workers is not given: enough threads for one model, few enough copies of it."""
CALL_DOCUMENTS = 256
"""The most documents a worker embeds in one call (one block of the job): the windows of a call are batched together,
and each call's vectors come back as soon as it ends."""
CALLS_PER_WORKER = 4
"""The job has at least this many calls per worker (when there are enough documents), so the workers share it evenly."""
CONNECT_TIMEOUT_S = 5.0
"""How long to wait for the cluster's port to answer: ray.init itself waits minutes on a wrong address."""

ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception): ")
"""A line of a Python traceback that names an error and its message."""
HOW_TO_START = (
    "Start a cluster on this machine with the command ray start --head and use the address it prints (e.g. "
    "127.0.0.1:6379), give a remote cluster's address (host:6379, or ray://host:10001 for Ray Client), or leave the "
    "Ray cluster address empty to embed on this machine."
)


def _ray(address: str) -> ModuleType:
    try:
        import ray
    except ImportError:
        raise EmbeddingError(
            f'Embedding on the Ray cluster at {address!r} needs the ray package: pip install "ray[data]". '
            "Or leave the Ray cluster address empty to embed on this machine."
        ) from None
    return ray


def _check_reachable(address: str) -> None:
    """Fails fast when nothing answers at the address's host and port ("auto" is left to ray)."""
    if address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise EmbeddingError(f"{address!r} is not a Ray cluster address (host:port or ray://host:port). {HOW_TO_START}")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as error:
        raise EmbeddingError(f"Cannot reach the Ray cluster at {address!r} ({error}). {HOW_TO_START}") from None


@contextmanager
def connected(address: str) -> Iterator[RayCluster]:
    """The cluster at `address`, connected for the duration (an existing connection of this process is reused and
    left open). Raises EmbeddingError, naming the address, when ray is missing or the cluster unreachable."""
    ray = _ray(address)
    opened_here = not ray.is_initialized()
    if opened_here:
        _check_reachable(address)
        try:
            ray.init(
                address=address,
                runtime_env={"py_modules": [prisma_core], "excludes": ["__pycache__"]},
                logging_level=logging.WARNING,
                log_to_driver=False,
            )
        except (ConnectionError, RuntimeError, ValueError) as error:
            raise EmbeddingError(f"Cannot connect to the Ray cluster at {address!r}: {error}. {HOW_TO_START}") from None
    try:
        yield RayCluster(address, ray.cluster_resources())
    finally:
        if opened_here:
            ray.shutdown()


class Embedder:
    """A Ray Data worker: loads the model once, then embeds each block of (text_hash, text) it is given."""

    def __init__(self, config: EmbedConfig) -> None:
        self.config = config
        load_embedder(config)  # the backends keep it for every later call of this worker

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        embedded = embed_documents(batch["text"].tolist(), self.config)
        return {
            "text_hash": batch["text_hash"],
            "vector": embedded.vectors,
            "chunks": embedded.chunking.chunks_per_doc,
            "tokens": embedded.chunking.tokens_per_doc,
        }


@dataclass(frozen=True)
class RayCluster:
    address: str
    resources: dict[str, float]

    def worker_config(self, config: EmbedConfig) -> EmbedConfig:
        """`config` with the backend and precision this machine resolves (so the workers compute the vector space
        model_key names), on the cluster's GPUs when the torch backend runs it and the device allows one."""
        backend = resolve_backend(config)
        on_gpu = backend == "torch" and config.device in ("auto", "cuda") and self.resources.get("GPU", 0) >= 1
        if config.device.startswith("cuda") and not on_gpu:
            raise EmbeddingError(f"The Ray cluster at {self.address!r} has no GPU: choose the device auto or cpu.")
        device = "cuda" if on_gpu else "cpu" if config.device == "auto" else config.device
        precision = resolve_config_precision(config)
        return replace(config, device=device, precision=precision, backend=backend, ray_address="", ray_workers=None)

    def workers(self, device: str, requested: int | None) -> tuple[int, dict[str, Any]]:
        """How many workers (`requested`, else the default), and the resources each asks for: one GPU each on GPUs,
        else an even share of the CPUs (which its threads then use: Ray sets OMP_NUM_THREADS to it)."""
        if device.startswith("cuda"):
            return requested or int(self.resources["GPU"]), {"num_gpus": 1}
        cpus = max(1, int(self.resources.get("CPU", 1)))
        count = requested or max(1, cpus // CPUS_PER_WORKER)
        return count, {"num_cpus": max(1, cpus // count)}

    def embedding(self, config: EmbedConfig) -> ComputeSlices:
        """How `config` embeds on this cluster (`_embed_slices` with its workers' settings), checked before anything
        is stored: a device the cluster lacks fails here."""
        worker_config = self.worker_config(config)
        count, resources = self.workers(worker_config.device, config.ray_workers)
        return functools.partial(self._embed_slices, worker_config, count, resources)

    def _embed_slices(
        self,
        worker_config: EmbedConfig,
        count: int,
        resources: dict[str, Any],
        missing: pd.DataFrame,
        progress: ProgressCallback,
        slice_documents: int,
    ) -> Iterator[ComputedSlice]:
        """Embeds the (text_hash, text) rows on `count` workers, yielding the vectors `slice_documents` at a time
        (and the last ones) in the order the workers finish them."""
        ray = _ray(self.address)
        blocks = max(math.ceil(len(missing) / CALL_DOCUMENTS), min(len(missing), CALLS_PER_WORKER * count))
        parts = [missing.iloc[rows] for rows in np.array_split(np.arange(len(missing)), blocks)]
        ray.data.DataContext.get_current().enable_progress_bars = False
        logging.getLogger("ray.data").setLevel(logging.ERROR)  # progress is reported here, not by Ray's logs and bars
        job = ray.data.from_pandas(parts).map_batches(
            Embedder,
            fn_constructor_kwargs={"config": worker_config},
            batch_size=max(len(part) for part in parts),
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=count),
            **resources,
        )
        pending: list[dict[str, np.ndarray]] = []
        done = 0
        try:
            for batch in job.iter_batches(batch_size=None, batch_format="numpy"):
                pending.append(batch)
                done += len(batch["text_hash"])
                report_documents(progress, done, len(missing))
                if sum(len(part["text_hash"]) for part in pending) >= slice_documents:
                    yield _computed(pending)
                    pending = []
        except ray.exceptions.RayError as error:
            raise EmbeddingError(f"Embedding on the Ray cluster at {self.address!r} failed: {_reason(error)}") from None
        if pending:
            yield _computed(pending)


def _reason(error: Exception) -> str:
    """What went wrong on a worker, from Ray's error (which carries the worker's whole traceback as text): the last
    error line, without its class name when it is one of Prisma's own messages."""
    failures = [line for line in str(error).splitlines() if ERROR_LINE.match(line)]
    if not failures:
        return str(error).splitlines()[0]
    return failures[-1].split(": ", 1)[1] if failures[-1].startswith("prisma_core.") else failures[-1]


def _computed(batches: list[dict[str, np.ndarray]]) -> ComputedSlice:
    hashes = np.concatenate([batch["text_hash"] for batch in batches])
    vectors = np.concatenate([batch["vector"] for batch in batches]).astype(np.float32, copy=False)
    return ComputedSlice(
        dict(zip(hashes.tolist(), vectors, strict=True)),
        int(sum(batch["chunks"].sum() for batch in batches)),
        int(sum(batch["tokens"].sum() for batch in batches)),
    )
