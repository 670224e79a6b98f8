"""OpenVINO embedding backend: the sentence-transformers model converted to OpenVINO once per machine, cached on
disk, and compiled for the CPU. A BERT model (the bundled one) is built from its weights without torch
(openvino_graph); any other is converted through torch.

At bf16 it runs at about 2.7x torch fp32 (1.3x torch bf16) on a CPU with AVX-512 BF16, at cosine >= 0.9999 to the
fp32 vectors (bench/fast_cpu.py); at int8 the converted model is quantized with NNCF first (embed/quantize.py). It
pools exactly what the torch model pools: the model's own pooling module is part of the converted graph, whose second
output is the token embeddings it pools (for passages). The model is compiled and run by embed/openvino_runtime.py,
through which openvino is imported (without its telemetry).

The converted model, its tokenizer and its window are kept in `cache_root()/<key>` (`$PRISMA_CACHE_DIR/openvino`,
else `~/.cache/prisma/openvino`), the key naming the model, the library versions and the precision
(embed/openvino_cache.py, which does not import openvino). A process that
finds its folder loads it without converting and without torch's copy of the weights. A folder is written under a
temporary name and renamed into place, so a process never reads a half-written model; two processes converting at
once both succeed, and the first rename wins.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Literal

from prisma_core.embed import openvino_graph
from prisma_core.embed.config import EmbedConfig, resolve_precision
from prisma_core.embed.embedder import LocalEmbedder
from prisma_core.embed.model import LOADING, EncoderSpec, Pooler, describe, load_model
from prisma_core.embed.openvino_cache import cache_key, cache_root
from prisma_core.embed.openvino_runtime import compile_for, openvino, openvino_pooler
from prisma_core.embed.quantize import quantize_checked
from prisma_core.errors import EmbeddingError
from prisma_core.memory import drop_file_pages

_MODEL_FILE = "model.xml"
_WEIGHTS_FILE = "model.bin"
_TOKENIZER_DIR = "tokenizer"
_ENCODER_FILE = "encoder.json"

PARENT_CHECK_S = 1.0
"""How often a conversion process checks that the process that started it is still there."""

conversions = 0
"""Models this process converted (not loaded from the cache): the tests read it."""


def _convert(model: str) -> tuple[openvino.Model, EncoderSpec]:
    """The model's sentence embedding and token embeddings as an OpenVINO graph of (input_ids, attention_mask), and
    the model described."""
    import torch

    encoder = load_model(model, "cpu", "fp32")

    class PooledModel(torch.nn.Module):
        """The sentence-transformers model as a function of (input_ids, attention_mask), which conversion needs."""

        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            embedded = self.encoder({"input_ids": input_ids, "attention_mask": attention_mask})
            return embedded["sentence_embedding"], embedded["token_embeddings"]

    example = encoder.tokenizer(["an example"], return_tensors="pt")
    inputs = {"input_ids": example["input_ids"], "attention_mask": example["attention_mask"]}
    dynamic = openvino.PartialShape([-1, -1])  # batch size and window length vary from call to call
    try:
        with warnings.catch_warnings():  # tracing warns about Python branches that do not depend on the input
            warnings.simplefilter("ignore")
            converted = openvino.convert_model(
                PooledModel().eval(),
                example_input=inputs,
                input=[(name, dynamic, openvino.Type.i64) for name in inputs],
            )
    except Exception as error:  # conversion fails in many ways for unusual architectures
        raise EmbeddingError(
            f"OpenVINO could not convert the model {model!r}: {error}. Choose the torch backend for this model."
        ) from error
    return converted, describe(encoder)


def _source(model: str) -> tuple[openvino.Model, EncoderSpec]:
    """The model as an OpenVINO graph of (input_ids, attention_mask), and its encoder: built from its weights without
    torch when it is a BERT sentence-transformers model (openvino_graph: the bundled model is), else converted
    through torch."""
    folder = openvino_graph.buildable(model)
    return _convert(model) if folder is None else openvino_graph.build(folder)


def _converted(model: str, precision: str) -> tuple[openvino.Model, EncoderSpec, Mapping[str, str]]:
    """The converted model (quantized to int8 and checked when asked), its encoder and the notes kept with it."""
    converted, encoder = _source(model)
    if precision != "int8":
        return converted, encoder, {}
    quantized, notes = quantize_checked(converted, encoder)
    return quantized, encoder, notes


def _convert_to_cache(model: str, folder: str, precision: str, parent: int | None = None) -> None:
    """Converts the model and writes its cache folder (what a conversion child process does; it ends when its
    `parent` process does, killed or not). Building a BERT model needs no torch, and torch is then kept out of the
    process: NNCF (int8) imports it whenever it is installed, for nothing here (the int8 conversion process peaked
    at 809 MB with it, BENCHMARKS.md section 8)."""
    if parent is not None:
        threading.Thread(target=_exit_without, args=(parent,), daemon=True).start()
    if openvino_graph.buildable(model) is not None:
        sys.modules.setdefault("torch", None)  # `import torch` now fails, and NNCF takes torch as absent
    _write(Path(folder), *_converted(model, precision), precision)


def _convert_in_child(model: str, folder: Path, precision: str) -> None:
    """Converts in a child process that writes the cache folder and exits: the conversion's (and quantization's)
    buffers leave with it instead of staying resident in this process. For a BERT model the child builds the graph
    without torch (see `_source`); for another model torch's copy of the weights leaves with it too (about 480 MB).
    The child is a fresh interpreter, never a fork: a fork would copy this whole process (a server with its sessions
    and LanceDB tables), and it imports nothing of the caller's main script."""
    arguments = f"{model!r}, {str(folder)!r}, {precision!r}, {os.getpid()}"
    code = f"from {__name__} import _convert_to_cache; _convert_to_cache({arguments})"
    environment = os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True)
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["the conversion process ended without a message"])[-1]
        raise EmbeddingError(reason.removeprefix(f"{EmbeddingError.__module__}.{EmbeddingError.__name__}: "))


def _exit_without(parent: int) -> None:
    """Ends this (conversion) process once `parent` has ended: a conversion nobody waits for is never left running."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_S)
    os._exit(1)


def _write(
    folder: Path, converted: openvino.Model, encoder: EncoderSpec, notes: Mapping[str, str], precision: str
) -> None:
    """Writes the folder atomically: everything (and each of `notes`, file name -> text) into a temporary folder
    beside it, then one rename. When another process renamed its copy first, that copy is kept. A cache that cannot
    be written (read-only home, full disk) only costs the next process a conversion.

    For bf16 the weights are stored at fp16: the compiled model keeps the weights it read besides its own bf16 copy,
    and fp16 halves them (the compiled model took 42 to 53 MB instead of 136, at cosine >= 0.99997 to the vectors of
    fp32 weights). fp32 keeps fp32 weights."""
    temporary = folder.parent / f".{folder.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        temporary.mkdir(parents=True)
        openvino.save_model(converted, temporary / _MODEL_FILE, compress_to_fp16=precision == "bf16")
        encoder.tokenizer.save_pretrained(temporary / _TOKENIZER_DIR)
        described = {field.name: getattr(encoder, field.name) for field in fields(encoder) if field.name != "tokenizer"}
        (temporary / _ENCODER_FILE).write_text(json.dumps(described))
        for name, text in notes.items():
            (temporary / name).write_text(text)
        temporary.rename(folder)
    except OSError as error:
        if not (folder / _MODEL_FILE).is_file():
            warnings.warn(f"Could not cache the converted model in {folder}: {error}", stacklevel=2)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def _read(folder: Path) -> tuple[openvino.Model, EncoderSpec] | None:
    """The cached model and encoder, or None when the folder is missing or unreadable (then converted again)."""
    if not (folder / _MODEL_FILE).is_file():
        return None
    try:
        from transformers import PreTrainedTokenizerFast  # not AutoTokenizer, which imports torch (+210 MB)

        described = json.loads((folder / _ENCODER_FILE).read_text())
        tokenizer = PreTrainedTokenizerFast.from_pretrained(str(folder / _TOKENIZER_DIR))
        model = openvino.Core().read_model(folder / _MODEL_FILE)
        return model, EncoderSpec(tokenizer=tokenizer, **described)
    except Exception:  # a folder damaged outside Prisma: set it aside, convert again
        shutil.rmtree(folder, ignore_errors=True)
        return None


@functools.lru_cache(maxsize=2)
def _compiled(model: str, precision: Literal["fp32", "bf16", "int8"]) -> tuple[openvino.CompiledModel, EncoderSpec]:
    """The compiled model and its encoder: from the disk cache, else converted (and cached for the next process)."""
    global conversions
    folder = cache_root() / cache_key(model, precision)
    cached = _read(folder)
    if cached is None:
        _convert_in_child(model, folder, precision)
        conversions += 1
        cached = _read(folder) or _converted(model, precision)[:2]  # a cache that cannot be written: convert here
    converted, encoder = cached
    try:
        compiled = compile_for(converted, precision)
    except Exception as error:
        raise EmbeddingError(f"OpenVINO could not compile the model {model!r}: {error}. Choose torch.") from error
    drop_file_pages(folder / _WEIGHTS_FILE)  # compiling read every weight; what inference reads comes back
    return compiled, encoder


def load_encoder(config: EmbedConfig) -> tuple[EncoderSpec, Pooler]:
    """The model's tokenizer, window and dimension, and a pooler on the compiled model, at the configured precision.
    `auto` is floating point here (bf16 where it is native, else fp32): whether `auto` goes to int8 is the package's
    choice (`prisma_core.embed.load_encoder` hands the backend the precision it chose)."""
    precision = resolve_precision(config.precision, "cpu")
    with LOADING:
        compiled, encoder = _compiled(config.model, precision)
    return encoder, openvino_pooler(compiled, encoder.tokenizer)


def release_compiled_models() -> None:
    _compiled.cache_clear()


def load_embedder(config: EmbedConfig) -> LocalEmbedder:
    """The backend's `Embedder` (embed/backends.py): the model described and its pooler."""
    return LocalEmbedder(*load_encoder(config))
