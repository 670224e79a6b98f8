"""int8 embedding: the OpenVINO model quantized after training with NNCF, and checked against fp32 before `auto`
uses it.

Quantization is calibrated on Prisma's own sentences (embed/calibration_texts.py: every other sentence, alone and
joined into paragraphs of several windows' length). NNCF's defaults for a transformer left a tail of documents far
from fp32 (lowest cosine 0.932 on 1,000 BBC articles and on 1,000 clinical notes, though the 1st percentile was 0.991).
Measured one group of operations at a time, the loss came from the feed-forward down-projections of the first three
layers (their inputs, GELU outputs, carry outlier channels); so those stay in floating point (`_kept_in_float`), with
the final normalisation, smooth quant moves less of the outliers into the weights (alpha SMOOTH_QUANT_ALPHA), and each
activation's range is its full min-max over the calibration (NNCF's default, the mean of each window's range, clips a
real document's larger values). Every document of the three shared corpora (BBC, AG News, MTSamples) then keeps cosine
>= 0.996 to fp32, at about 0.93x the speed of the all-int8 model and still 1.3x to 1.4x bf16 on a CPU with AVX-512 VNNI
and BF16 (BENCHMARKS.md section 21). The quantized model is checked on the other half of the sentences: the cosines
of their chunk-and-average document vectors, computed through the same chunking and averaging as any dataset's, to
the fp32 vectors. The measured cosines are stored in the model's cache folder with the model (openvino_backend), so
each machine quantizes and checks once; `auto` reads them and uses int8 only when they pass its thresholds
(embed/int8_choice.py), else says why and keeps bf16 (or fp32).

The check also times the int8 model against the model it would replace (bf16 where the CPU has it natively, else
fp32) on the check documents on this CPU (TIMED_PASSES each, alternating, the quickest pass counting): `auto` uses
int8 only where it measured faster than that, so the choice follows this CPU's speed as well as its instruction set
(on an AVX2 CPU without int8 dot products int8 measured 0.7x OpenVINO fp32, BENCHMARKS.md section 16).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from prisma_core.embed.calibration_texts import SENTENCES
from prisma_core.embed.chunking import average_by_document, encode_chunks, plan_chunks
from prisma_core.embed.config import EmbedConfig, cpu_has_native_bf16
from prisma_core.embed.model import Encoder, Pooler
from prisma_core.errors import EmbeddingError

if TYPE_CHECKING:  # openvino is imported only to quantize or to load a model: `auto` reads the check without it
    import openvino

logger = logging.getLogger(__name__)

CHECK_FILE = "int8_check.json"
"""The check's measurements, kept in the int8 model's cache folder."""
TIMED_PASSES = 2
"""Timed passes of each model over the check documents: the quickest counts (a busy machine slows some passes)."""
PARAGRAPH_SIZES = (4, 24)
"""Sentences per paragraph: besides each sentence alone, paragraphs of a few sentences and of two windows or more."""
QUANTIZATION_RECIPE = 3
"""How the model is quantized and checked, in the int8 model's cache key (embed/openvino_cache.py): bumped whenever
`_quantize` or the check changes, so a model quantized or checked the older way is quantized again (2: min-max
activation ranges, SMOOTH_QUANT_ALPHA, the first FLOAT_DOWN_PROJECTIONS down-projections and the final normalisation in
floating point; 3: the check times int8 against the precision it replaces, bf16 where native)."""
FLOAT_DOWN_PROJECTIONS = 3
"""Feed-forward down-projections (the MatMul after each layer's GELU) kept in floating point, from the first layer:
the most sensitive to int8 (each of the first three alone in float raised the lowest cosine of the worst documents;
the later ones did not); all six kept the same accuracy at lower speed."""
SMOOTH_QUANT_ALPHA = 0.8
"""Smooth quant's migration strength for MatMuls (NNCF's default for transformers, 0.95, left a lowest cosine of 0.991
on the worst documents with the rest of this recipe; 0.8: 0.997)."""


@dataclass(frozen=True)
class Int8Check:
    """How close the int8 model's document vectors are to the fp32 model's on the check documents."""

    mean_cosine: float
    min_cosine: float
    documents: int
    int8_seconds: float | None = None
    """The quickest pass of the int8 model over the check documents on this machine ..."""
    replaced_seconds: float | None = None
    """... and of the model int8 replaces (`replaced`), in the same process, alternating with it."""
    replaced: Literal["fp32", "bf16"] = "fp32"
    """The precision `auto` embeds at without int8 on this machine: bf16 where the CPU has it natively, else fp32."""

    def failure(self, min_mean_cosine: float, min_cosine: float) -> str | None:
        """Why int8 is not accurate enough under these thresholds, or not faster than the precision it replaces, or
        None when it is both."""
        if self.mean_cosine < min_mean_cosine:
            return f"mean cosine to fp32 {self.mean_cosine:.4f} < {min_mean_cosine}"
        if self.min_cosine < min_cosine:
            return f"lowest cosine to fp32 {self.min_cosine:.4f} < {min_cosine}"
        timed = self.int8_seconds is not None and self.replaced_seconds is not None
        if timed and self.int8_seconds >= self.replaced_seconds:
            return (
                f"int8 took {self.int8_seconds:.2f} s on this CPU, {self.replaced} {self.replaced_seconds:.2f} s: "
                "not faster"
            )
        return None


def documents(sentences: tuple[str, ...]) -> list[str]:
    """Each sentence alone, then consecutive sentences joined into paragraphs of each of PARAGRAPH_SIZES."""
    paragraphs = [
        " ".join(sentences[start : start + size])
        for size in PARAGRAPH_SIZES
        for start in range(0, len(sentences), size)
    ]
    return list(sentences) + paragraphs


def calibration_documents() -> list[str]:
    return documents(SENTENCES[::2])


def check_documents() -> list[str]:
    return documents(SENTENCES[1::2])


def quantize_checked(converted: openvino.Model, encoder: Any) -> tuple[openvino.Model, dict[str, str]]:
    """The int8 model and the files to keep with it (its check against `converted`, the fp32 model)."""
    quantized = _quantize(converted, encoder)
    check = _measure(converted, quantized, encoder)
    logger.info("int8 model checked against fp32: %s", check)
    return quantized, {CHECK_FILE: json.dumps(asdict(check))}


def _quantize(converted: openvino.Model, encoder: Any) -> openvino.Model:
    """Post-training int8 quantization, calibrated on one window per input (its own length, no padding)."""
    try:
        import nncf
    except ImportError as error:
        raise EmbeddingError("int8 embedding needs the nncf package: pip install nncf") from error
    windows = plan_chunks(encoder, calibration_documents()).chunk_ids
    inputs = [
        {"input_ids": np.asarray([ids], dtype=np.int64), "attention_mask": np.ones((1, len(ids)), dtype=np.int64)}
        for ids in windows
    ]
    nncf.set_log_level(logging.WARNING)
    with contextlib.redirect_stdout(io.StringIO()):  # NNCF's progress bars
        return nncf.quantize(
            converted,
            nncf.Dataset(inputs),
            model_type=nncf.ModelType.TRANSFORMER,
            subset_size=len(inputs),
            ignored_scope=_kept_in_float(converted),
            advanced_parameters=_parameters(),
        )


def _kept_in_float(converted: openvino.Model) -> Any:
    """The operations left in floating point (an `nncf.IgnoredScope`): the first FLOAT_DOWN_PROJECTIONS feed-forward
    down-projections, found as the MatMuls fed by a GELU (a model whose graph has none keeps none), and the final
    L2 normalisation, whose input NNCF would otherwise round to 256 levels after pooling."""
    import nncf

    down_projections = [
        operation.get_friendly_name()
        for operation in converted.get_ordered_ops()
        if operation.get_type_name() == "MatMul" and operation.input_value(0).get_node().get_type_name() == "Gelu"
    ]
    return nncf.IgnoredScope(names=down_projections[:FLOAT_DOWN_PROJECTIONS], types=["NormalizeL2"], validate=False)


def _parameters() -> Any:
    """NNCF's advanced parameters: activation ranges from the full min-max of the calibration windows (not the mean of
    each window's, which clipped real documents' larger values), and smooth quant at SMOOTH_QUANT_ALPHA."""
    from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters, AdvancedSmoothQuantParameters
    from nncf.quantization.range_estimator import RangeEstimatorParametersSet

    return AdvancedQuantizationParameters(
        activations_range_estimator_params=RangeEstimatorParametersSet.MINMAX,
        smooth_quant_alphas=AdvancedSmoothQuantParameters(matmul=SMOOTH_QUANT_ALPHA),
    )


def _measure(converted: openvino.Model, quantized: openvino.Model, encoder: Any) -> Int8Check:
    """Cosine of int8 to fp32 chunk-and-average document vectors of the check documents, and the quickest of
    TIMED_PASSES passes over them of the int8 model and of the model it replaces (bf16 where native, else fp32),
    after a first, untimed pass of each that also warms it up."""
    from prisma_core.embed.openvino_runtime import compile_for, openvino_pooler  # imports openvino (see TYPE_CHECKING)

    replaced = "bf16" if cpu_has_native_bf16() else "fp32"
    texts = check_documents()
    models = {"fp32": converted, replaced: converted, "int8": quantized}
    pools = {
        precision: openvino_pooler(compile_for(model, precision), encoder.tokenizer)
        for precision, model in models.items()
    }
    vectors = {precision: document_vectors(encoder, pool, texts) for precision, pool in pools.items()}
    seconds: dict[str, list[float]] = {precision: [] for precision in (replaced, "int8")}
    for _ in range(TIMED_PASSES):
        for precision in seconds:
            started = time.perf_counter()
            document_vectors(encoder, pools[precision], texts)
            seconds[precision].append(time.perf_counter() - started)
    reference, measured = vectors["fp32"], vectors["int8"]
    cosines = np.einsum("ij,ij->i", reference, measured) / (
        np.linalg.norm(reference, axis=1) * np.linalg.norm(measured, axis=1)
    ).clip(min=1e-12)
    return Int8Check(
        float(cosines.mean()),
        float(cosines.min()),
        len(cosines),
        min(seconds["int8"]),
        min(seconds[replaced]),
        replaced,
    )


def document_vectors(encoder: Encoder, pool: Pooler, texts: list[str]) -> np.ndarray:
    """Chunk-and-average vectors of `texts` through an already compiled model, at the default batch size."""
    chunking = plan_chunks(encoder, texts)
    chunks, _ = encode_chunks(pool, chunking.chunk_ids, encoder.get_embedding_dimension(), EmbedConfig().batch_size)
    return average_by_document(chunks, chunking.chunk_owner, len(texts))
