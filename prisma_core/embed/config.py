"""Embedding settings and how "auto" resolves to a device and a precision on this machine."""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

DEFAULT_MODEL = "all-MiniLM-L6-v2"

Precision = Literal["auto", "fp32", "bf16"]
Backend = Literal["auto", "torch", "openvino"]


@dataclass(frozen=True)
class EmbedConfig:
    model: str = DEFAULT_MODEL
    """A sentence-transformers model id or local path; all-MiniLM-L6-v2 is bundled and works offline."""
    batch_size: int = 64
    """Chunks per forward pass."""
    normalize: bool = False
    """L2-normalise each document vector after averaging its chunks."""
    precision: Precision = "auto"
    """auto: bf16 where the CPU has native bf16 (AMX / AVX-512 BF16) or on a GPU, else fp32."""
    device: str = "auto"
    """auto: cuda, then mps, then cpu."""
    backend: Backend = "auto"
    """What runs the model. auto: OpenVINO on a CPU at bf16 when the openvino package is installed (about 2.7x torch
    fp32 and 1.3x torch bf16 on an AVX-512 BF16 CPU, bench/fast_cpu.py), else torch."""

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if self.precision not in ("auto", "fp32", "bf16"):
            raise ValueError(f"precision must be auto, fp32 or bf16, not {self.precision!r}")
        if self.backend not in ("auto", "torch", "openvino"):
            raise ValueError(f"backend must be auto, torch or openvino, not {self.backend!r}")


def resolve_device(device: str = "auto") -> str:
    if device != "auto":
        return device
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def cpu_has_native_bf16() -> bool:
    """True on x86 CPUs with AMX or AVX-512 BF16, where bf16 inference measured ~2.8x faster than fp32.

    Elsewhere bf16 is emulated and far slower than fp32, so it is never chosen automatically.
    """
    if platform.system() != "Linux":
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " amx_bf16" in flags or " avx512_bf16" in flags


def resolve_precision(precision: Precision, device: str) -> Literal["fp32", "bf16"]:
    if precision != "auto":
        return precision
    if device == "cuda":
        return "bf16"
    return "bf16" if device == "cpu" and cpu_has_native_bf16() else "fp32"
