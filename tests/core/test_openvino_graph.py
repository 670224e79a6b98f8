"""The bundled model built as an OpenVINO graph from its weights, without torch (embed/openvino_graph.py): the same
vectors as the torch model, and a conversion process that never imports torch (issue 26: converting through torch
took up to 987 MB beside the app)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from prisma_core.embed import DEFAULT_MODEL
from prisma_core.embed.model import load_model, resolve_model_path

REPO = Path(__file__).resolve().parents[2]


def test_the_built_graph_gives_the_torch_models_vectors(bbc):
    import openvino

    from prisma_core.embed.openvino_graph import build, buildable

    folder = buildable(DEFAULT_MODEL)
    assert folder is not None
    model, spec = build(folder)
    tokenizer = spec.tokenizer
    assert (spec.max_seq_length, spec.dimension, spec.pools_by_mean, spec.normalizes) == (256, 384, True, True)
    window = spec.max_seq_length
    texts = [*bbc["text"].head(6), "a b", "Chest pain."]  # long ones cut at the window, short ones padded
    batch = tokenizer(texts, padding=True, truncation=True, max_length=window, return_tensors="np")
    inputs = {name: batch[name].astype(np.int64) for name in ("input_ids", "attention_mask")}
    outputs = openvino.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})(inputs)
    built, states = outputs[0], outputs[1]
    torch_model = load_model(DEFAULT_MODEL, "cpu", "fp32")
    reference = torch_model.encode(texts, batch_size=len(texts))
    cosine = (built * reference).sum(axis=1) / np.linalg.norm(built, axis=1) / np.linalg.norm(reference, axis=1)
    assert cosine.min() >= 0.9999
    assert np.linalg.norm(built, axis=1) == pytest.approx(1.0, abs=1e-5)  # the model's Normalize module
    with torch.inference_mode():  # the second output: the token embeddings the sentence embedding is pooled from
        torch_states = torch_model({name: torch.from_numpy(array) for name, array in inputs.items()})
    real = inputs["attention_mask"].astype(bool)
    expected = torch_states["token_embeddings"].numpy()[real]
    token_cosine = (states[real] * expected).sum(axis=1) / np.linalg.norm(states[real], axis=1)
    assert (token_cosine / np.linalg.norm(expected, axis=1)).min() >= 0.9999


def test_only_bert_models_with_mean_pooling_are_built(tmp_path):
    from prisma_core.embed.openvino_graph import buildable

    bundled = resolve_model_path(DEFAULT_MODEL)
    for change in ("cls pooling", "a dense layer", "another architecture"):
        folder = tmp_path / change.replace(" ", "_")
        shutil.copytree(bundled, folder, ignore=shutil.ignore_patterns("*.safetensors"))
        (folder / "model.safetensors").symlink_to(f"{bundled}/model.safetensors")
        assert buildable(str(folder)) == folder
        if change == "cls pooling":
            pooling = folder / "1_Pooling" / "config.json"
            config = json.loads(pooling.read_text()) | {"pooling_mode_cls_token": True}
            pooling.write_text(json.dumps(config))
        elif change == "a dense layer":
            modules = json.loads((folder / "modules.json").read_text())
            modules.append({"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"})
            (folder / "modules.json").write_text(json.dumps(modules))
        else:
            config = json.loads((folder / "config.json").read_text()) | {"model_type": "roberta"}
            (folder / "config.json").write_text(json.dumps(config))
        assert buildable(str(folder)) is None, change  # converted through torch instead
    assert buildable(str(tmp_path / "missing")) is None


def test_converting_the_bundled_model_never_imports_torch(tmp_path):
    code = (
        "import sys\n"
        "from prisma_core.embed.openvino_backend import _convert_to_cache\n"
        f"_convert_to_cache({DEFAULT_MODEL!r}, {str(tmp_path / 'model')!r}, 'fp32')\n"
        "print(sorted(name for name in ('torch', 'sentence_transformers') if sys.modules.get(name) is not None))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"
    assert (tmp_path / "model" / "model.xml").is_file() and (tmp_path / "model" / "tokenizer").is_dir()
    described = json.loads((tmp_path / "model" / "encoder.json").read_text())
    assert described == {"max_seq_length": 256, "dimension": 384, "pools_by_mean": True, "normalizes": True}
