"""openvino itself, imported here first, and a converted model compiled and run on the CPU: what the OpenVINO backend
(openvino_backend) and the int8 check (quantize) both run a model with.

OpenVINO's `openvino_telemetry` package, which it installs with itself, sends usage reports from forked child
processes when openvino is imported and whenever a model is converted: unasked-for network traffic from an app that
reads private documents, and each fork copies the whole server process (dozens per conversion, each warning that
LanceDB in a forked child may deadlock). This module marks that package as absent before it imports openvino, so
openvino falls back to its own no-op telemetry stub; Prisma imports openvino nowhere before it (openvino_graph and
NNCF run only inside the backend, which imports this module first).
"""

from __future__ import annotations

import os
import sys
from typing import Any, Literal

import numpy as np

from prisma_core.embed.config import cpu_has_native_bf16
from prisma_core.embed.model import Pooled, Pooler, padded_length, span_means

sys.modules.setdefault("openvino_telemetry", None)  # no usage reports, no forks (see the module docstring)
PRIMITIVE_CACHE = 64
"""Compiled kernels oneDNN (OpenVINO's CPU library) keeps for reuse, process-wide, past the model that made them
(its default, 1,024, kept about 50 MB resident once the model was let go after embedding 600 articles; 64 keeps 17,
as fast; BENCHMARKS.md section 8). Read once, when openvino is first imported: a setting made for the process wins."""
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(PRIMITIVE_CACHE))
import openvino  # noqa: E402


def compile_for(converted: openvino.Model, precision: Literal["fp32", "bf16", "int8"]) -> openvino.CompiledModel:
    """The model compiled for the CPU. What int8 leaves in floating point runs at bf16 where the CPU has it. A process
    given a share of the CPUs (OMP_NUM_THREADS, which Ray sets for each embedding worker) runs that many threads;
    else OpenVINO takes every core."""
    bf16 = precision == "bf16" or (precision == "int8" and cpu_has_native_bf16())
    properties: dict[str, Any] = {"INFERENCE_PRECISION_HINT": "bf16" if bf16 else "f32"}
    if os.environ.get("OMP_NUM_THREADS", "").isdigit():
        properties["INFERENCE_NUM_THREADS"] = int(os.environ["OMP_NUM_THREADS"])
    return openvino.Core().compile_model(converted, "CPU", properties)


def openvino_pooler(compiled: openvino.CompiledModel, tokenizer: Any) -> Pooler:
    """A pooler on the compiled model (outputs: the sentence embeddings, then the token embeddings); each call has its
    own inference request, so concurrent jobs can share it."""

    def pool(batch_ids: list[list[int]], spans: np.ndarray | None = None) -> Pooled:
        length = padded_length(max(len(ids) for ids in batch_ids))
        padded = tokenizer.pad({"input_ids": batch_ids}, padding="max_length", max_length=length, return_tensors="np")
        inputs = {name: padded[name].astype(np.int64) for name in ("input_ids", "attention_mask")}
        request = compiled.create_infer_request()
        outputs = request.infer(inputs, share_outputs=True)  # views of the request's buffers: nothing copied
        sentences = np.array(outputs[0], dtype=np.float32)
        if spans is None:
            return Pooled(sentences, np.zeros((0, sentences.shape[1]), np.float32))
        return Pooled(sentences, span_means(outputs[1], spans))

    return pool
