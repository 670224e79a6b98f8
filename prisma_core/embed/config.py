"""Embedding settings and how "auto" resolves to a device and a precision on this machine."""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from prisma_core.config_docs import DEVICE_CHOICES, CheckedConfig, setting
from prisma_core.embed.backends import BACKEND_CHOICES
from prisma_core.errors import EmbeddingError

DEFAULT_MODEL = "all-MiniLM-L6-v2"

Precision = Literal["auto", "fp32", "bf16", "int8"]
Backend = Literal[BACKEND_CHOICES]  # type: ignore[valid-type]  # the registry's names, written once there

RAY_ADDRESS_ENV = "PRISMA_RAY_ADDRESS"
CPU_FLAGS_ENV = "PRISMA_CPU_FLAGS"

COSINE_FLOOR = 0.97
"""The lowest cosine to fp32 a document's vector may have at a precision `auto` chooses (int8, bf16): the int8 model's
first check (embed/int8_choice.py), the check on each dataset's own documents (embed/faithful.py) and the tests."""


def default_ray_address() -> str:
    """The PRISMA_RAY_ADDRESS environment variable when set, else "" (embed on this machine), read when a config is
    made."""
    return os.environ.get(RAY_ADDRESS_ENV, "").strip()


@dataclass(frozen=True)
class EmbedConfig(CheckedConfig):
    settings_name = "embedding"

    model: str = setting(
        DEFAULT_MODEL,
        label="Model",
        help="The language model that turns each document into numbers. The bundled all-MiniLM-L6-v2 works "
        "offline; any sentence-transformers model name or local folder can be typed instead.",
        doc="A sentence-transformers model id or local path; all-MiniLM-L6-v2 is bundled and works offline.",
    )
    batch_size: int = setting(
        16,
        label="Batch size",
        minimum=1,
        maximum=4_096,
        help="How many text pieces are processed at once. Lower it if the app runs out of memory.",
        doc="Chunks per forward pass. On a CPU 16 runs at the speed of 64 with a third of the working memory "
        "(about 280 MB above the model at its peak instead of 700 MB; BENCHMARKS.md section 8).",
    )
    normalize: bool = setting(
        False,
        label="Normalise",
        help="Give every document vector the same length, so only its direction (its meaning) counts.",
        doc="L2-normalise each document vector after averaging its chunks.",
    )
    precision: Precision = setting(
        "auto",
        label="Precision",
        help="Number precision. Auto uses the faster int8 or bf16 where the processor supports them, only when the "
        "results stay practically the same.",
        doc="auto: int8 on the OpenVINO backend where the CPU has int8 dot products (AVX-512 VNNI / AMX) and "
        "the int8 model passed its accuracy check on this machine and measured faster there than the precision it "
        "replaces (bf16 where native, else fp32) "
        "(embed/quantize.py); else bf16 where the CPU has native bf16 (AMX / AVX-512 BF16) or on a GPU; "
        "else fp32. int8 runs on the OpenVINO backend only.",
    )
    device: str = setting(
        "auto",
        label="Device",
        choices=DEVICE_CHOICES,
        help="Where the model runs: auto picks a GPU when there is one, else the CPU.",
        doc="auto: cuda, then mps, then cpu.",
    )
    backend: Backend = setting(
        "auto",
        label="Backend",
        help="The software that runs the model. Auto picks the fastest available; choose torch if the fast path "
        "causes trouble. Ollama asks an Ollama server (its address: OLLAMA_HOST) to embed with the model named above.",
        doc="What runs the model (embed/backends.py). auto: OpenVINO on a CPU at int8 or bf16 when the openvino "
        "package is installed (bf16: about 2.7x torch fp32 and 1.3x torch bf16 on an AVX-512 BF16 CPU, "
        "bench/fast_cpu.py; int8: bench/int8.py), else torch. ollama: the Ollama server at $OLLAMA_HOST "
        "(http://localhost:11434 by default; a hosted one's key: $OLLAMA_API_KEY) embeds with its model `model` "
        '(e.g. all-minilm), each document\'s windows averaged; its vectors are a space of their own ("model|ollama").',
    )
    ray_address: str = setting(
        default_factory=default_ray_address,
        label="Ray cluster address (optional)",
        help="Run the embedding on a Ray cluster (several computers, or several processes on this one) instead of "
        "only on this computer, for large collections. Type the address the cluster gave when it was started, like "
        "127.0.0.1:6379 or ray://my-cluster:10001. Leave it empty to embed here. The vectors are the same either way.",
        unprefixed_flag=True,
        doc="Embed on the Ray cluster at this address (host:6379, ray://host:10001, or auto for the cluster "
        "started on this machine with `ray start --head`) as a Ray Data job; empty: on this machine. "
        "$PRISMA_RAY_ADDRESS by default. The vector space (model_key) does not depend on it. Needs `pip "
        'install "ray[data]"`.',
    )
    ray_workers: int | None = setting(
        None,
        minimum=1,
        maximum=10_000,
        unprefixed_flag=True,
        doc="Embedding workers on the Ray cluster, each loading the model once. Default: one per GPU when the "
        "cluster has GPUs and the vector space runs on them (the torch backend), else one per 4 CPUs of "
        "the cluster.",
    )


def resolve_device(device: str = "auto") -> str:
    """The device to embed on: "auto" picks CUDA, then Apple MPS, then the CPU; any other as named."""
    if device == "auto":
        return "cuda" if _has_cuda() else "mps" if _has_mps() else "cpu"
    return device


def check_device(device: str) -> None:
    """Raises EmbeddingError when a device asked for by name is not on this machine (before a model is loaded)."""
    if (device.startswith("cuda") and not _has_cuda()) or (device == "mps" and not _has_mps()):
        kind = "no Apple MPS is" if device == "mps" else "no CUDA GPU is"
        raise EmbeddingError(f'Device "{device}" was asked for but {kind} available here; use "auto" or "cpu".')


def _has_cuda() -> bool:
    if _linux_without_gpu():
        return False  # without importing torch (+210 MB) only to hear that there is no GPU
    import torch  # here, not at the top: settings and the CLI's --help do not need torch

    return torch.cuda.is_available()


def _has_mps() -> bool:
    if platform.system() != "Darwin":
        return False
    import torch

    return torch.backends.mps.is_available()


def _linux_without_gpu() -> bool:
    """True on Linux when no GPU driver's device exists (no /dev/nvidia*, no ROCm's /dev/kfd)."""
    return platform.system() == "Linux" and not any(Path("/dev").glob("nvidia*")) and not Path("/dev/kfd").exists()


def _cpu_has_any(flags: tuple[str, ...]) -> bool:
    """True when the (Linux) CPU lists one of these feature flags, or PRISMA_CPU_FLAGS does when it is set."""
    return bool(set(flags) & cpu_flags())


def cpu_flags() -> set[str]:
    """The CPU's feature flags (Linux), or those PRISMA_CPU_FLAGS lists when it is set (space-separated, e.g. "avx2"):
    `auto` then chooses as it would on such a CPU, so the suite can run the numeric path another machine would take
    (docs/testing.md)."""
    if CPU_FLAGS_ENV in os.environ:
        return set(os.environ[CPU_FLAGS_ENV].split())
    return set(_listed_cpu_flags())


@functools.cache
def _listed_cpu_flags() -> frozenset[str]:
    """The flags /proc/cpuinfo lists, read once per process (every vector space named asks, several times)."""
    if platform.system() != "Linux":
        return frozenset()
    try:
        listed = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    lines = listed.splitlines()
    return frozenset(flag for line in lines if line.startswith("flags") for flag in line.split(":", 1)[1].split())


def cpu_has_native_bf16() -> bool:
    """True on x86 CPUs with AMX or AVX-512 BF16, where bf16 inference measured ~2.8x faster than fp32.

    Elsewhere bf16 is emulated and far slower than fp32, so it is never chosen automatically.
    """
    return _cpu_has_any(("amx_bf16", "avx512_bf16"))


def cpu_has_int8_dot_product() -> bool:
    """True on x86 CPUs with AVX-512 VNNI, AVX-VNNI or AMX int8, where int8 inference beats bf16 (BENCHMARKS.md,
    section 9); elsewhere int8 is never chosen automatically."""
    return _cpu_has_any(("avx512_vnni", "avx_vnni", "amx_int8"))


def resolve_precision(precision: Precision, device: str) -> Literal["fp32", "bf16", "int8"]:
    """An explicit precision as it is; auto as floating point: bf16 where it is native, else fp32 (whether auto
    goes further, to int8, depends on the model and the backend: `prisma_core.embed.resolve_config_precision`)."""
    if precision != "auto":
        return precision
    if device == "cuda":
        return "bf16"
    return "bf16" if device == "cpu" and cpu_has_native_bf16() else "fp32"
