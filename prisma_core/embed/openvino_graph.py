"""A BERT sentence-transformers model built as an OpenVINO graph straight from its safetensors weights, without torch.

Converting through torch (`openvino.convert_model` of the traced model) needs torch, sentence-transformers and a
second copy of the weights: the conversion process took up to 987 MB beside the app (issue 26), more than Streamlit
Community Cloud gives the whole app. A BERT encoder is a short, fixed computation, so for the models that are one
(the bundled all-MiniLM-L6-v2, and any sentence-transformers folder of a BERT model with mean pooling) the graph is
written here with OpenVINO's operations and the weights read with safetensors' numpy loader: the same vectors as the
torch model (cosine >= 0.9999, tests/core/test_openvino_graph.py), with numpy, openvino and the tokenizer only.

The graph: token (an fp16 table, see `_half_table`), position and segment (0) embeddings, LayerNorm; per layer, self-
attention (OpenVINO's scaled dot product attention, padded tokens masked out) with its output projection, residual and
LayerNorm, then the feed-forward block (exact GELU) with residual and LayerNorm; mean pooling over the real tokens; L2
normalisation when the model has a Normalize module. Inputs input_ids and attention_mask [batch, tokens] (int64);
outputs the sentence embeddings [batch, dim] and the final hidden states [batch, tokens, dim] they are pooled from (what
a passage's vector is the mean of, `embed/passages.py`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from prisma_core.embed.model import EncoderSpec, pools_by_mean_only, resolve_model_path

POOLING = "sentence_transformers.models.Pooling"
MODULES = {
    "sentence_transformers.models.Transformer",
    POOLING,
    "sentence_transformers.models.Normalize",
}
"""The sentence-transformers modules this builder knows; a model with any other (a Dense layer...) is converted
through torch."""


def buildable(model: str) -> Path | None:
    """The model's folder when it is a BERT sentence-transformers model this module builds, else None."""
    folder = Path(resolve_model_path(model))
    try:
        modules = json.loads((folder / "modules.json").read_text())
        config = json.loads((folder / "config.json").read_text())
        pooling = json.loads((folder / _pooling_path(modules) / "config.json").read_text())
    except (OSError, ValueError, KeyError, StopIteration):
        return None
    mean_only = pools_by_mean_only(pooling)
    known = {module["type"] for module in modules} <= MODULES
    bert = config.get("model_type") == "bert" and config.get("hidden_act") == "gelu"
    absolute = config.get("position_embedding_type", "absolute") == "absolute"
    weights = (folder / "model.safetensors").is_file()
    return folder if mean_only and known and bert and absolute and weights else None


def build(folder: Path) -> tuple[Any, EncoderSpec]:
    """The OpenVINO model of the model in `folder` and its EncoderSpec (tokenizer, window in tokens, dimension)."""
    from safetensors.numpy import load_file
    from transformers import PreTrainedTokenizerFast  # not AutoTokenizer, which imports torch

    modules = json.loads((folder / "modules.json").read_text())
    config = json.loads((folder / "config.json").read_text())
    window = int(json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"])
    weights = load_file(folder / "model.safetensors")
    normalize = any(module["type"].endswith(".Normalize") for module in modules)
    model = _graph(weights, config, normalize)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(folder))
    return model, EncoderSpec(tokenizer, window, int(config["hidden_size"]), pools_by_mean=True, normalizes=normalize)


def _pooling_path(modules: list[dict[str, Any]]) -> str:
    return next(module["path"] for module in modules if module["type"] == POOLING)


def _half_table(table: np.ndarray) -> Any:
    """The word embedding table kept at fp16 and widened to fp32 row by row as tokens are looked up: OpenVINO's CPU
    plugin gathers from the fp16 table, so it holds half the table's 47 MB (the bundled model: 45 MB less once
    compiled, 28 MB less after embedding) and no fp32 copy; the vectors have cosine >= 0.9999999 to the fp32 table's."""
    import openvino.opset13 as op

    return op.convert(op.constant(table.astype(np.float16)), "f32")


def _graph(weights: dict[str, np.ndarray], config: dict[str, Any], normalize: bool) -> Any:
    import openvino as ov
    import openvino.opset13 as op

    eps = float(config.get("layer_norm_eps", 1e-12))
    heads, hidden = int(config["num_attention_heads"]), int(config["hidden_size"])
    input_ids = op.parameter([-1, -1], ov.Type.i64, name="input_ids")
    attention_mask = op.parameter([-1, -1], ov.Type.i64, name="attention_mask")

    def weight(name: str) -> Any:
        return op.constant(weights[name].astype(np.float32))

    def linear(x: Any, name: str) -> Any:  # x @ W^T + b, W: [out, in]
        return op.add(op.matmul(x, weight(f"{name}.weight"), False, True), weight(f"{name}.bias"))

    def layer_norm(x: Any, name: str) -> Any:
        normed = op.mvn(x, op.constant(np.array([-1], np.int64)), True, eps, "inside_sqrt")
        return op.add(op.multiply(normed, weight(f"{name}.weight")), weight(f"{name}.bias"))

    length = op.gather(op.shape_of(input_ids), op.constant(np.array([1], np.int64)), op.constant(np.int64(0)))
    positions = op.slice(
        weight("embeddings.position_embeddings.weight"),
        op.constant(np.array([0], np.int64)),
        length,
        op.constant(np.array([1], np.int64)),
        op.constant(np.array([0], np.int64)),
    )
    segment = op.constant(weights["embeddings.token_type_embeddings.weight"][:1].astype(np.float32))
    words = op.gather(_half_table(weights["embeddings.word_embeddings.weight"]), input_ids, op.constant(np.int64(0)))
    x = layer_norm(op.add(op.add(words, positions), segment), "embeddings.LayerNorm")

    keep = op.unsqueeze(op.convert(attention_mask, ov.Type.boolean), op.constant(np.array([1, 2], np.int64)))
    split = op.constant(np.array([0, 0, heads, hidden // heads], np.int64))  # [batch, tokens, heads, head size]
    to_heads, merged = [0, 2, 1, 3], op.constant(np.array([0, 0, hidden], np.int64))
    scale = op.constant(np.float32(1.0 / math.sqrt(hidden // heads)))
    for index in range(int(config["num_hidden_layers"])):
        name = f"encoder.layer.{index}"
        q, k, v = (
            op.transpose(op.reshape(linear(x, f"{name}.attention.self.{part}"), split, True), to_heads)
            for part in ("query", "key", "value")
        )
        context = op.scaled_dot_product_attention(q, k, v, keep, scale, causal=False)
        context = op.reshape(op.transpose(context, to_heads), merged, True)
        attended = layer_norm(
            op.add(linear(context, f"{name}.attention.output.dense"), x), f"{name}.attention.output.LayerNorm"
        )
        inner = op.gelu(linear(attended, f"{name}.intermediate.dense"), "erf")
        x = layer_norm(op.add(linear(inner, f"{name}.output.dense"), attended), f"{name}.output.LayerNorm")

    real = op.unsqueeze(op.convert(attention_mask, ov.Type.f32), op.constant(np.array([2], np.int64)))
    summed = op.reduce_sum(op.multiply(x, real), op.constant(np.array([1], np.int64)), False)
    counted = op.maximum(
        op.reduce_sum(real, op.constant(np.array([1], np.int64)), False), op.constant(np.float32(1e-9))
    )
    pooled = op.divide(summed, counted)
    if normalize:
        pooled = op.normalize_l2(pooled, op.constant(np.array([1], np.int64)), 1e-24, "max")
    return ov.Model([op.result(pooled), op.result(x)], [input_ids, attention_mask], "sentence_embedding")
