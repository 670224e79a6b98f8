"""Benchmark 3: SAE training, Prisma's trainer vs the `latentsae` package, on the same embeddings and settings.

    .venv/bin/python -m bench.sae_training [--quick]

Both trainers get the same training vectors and the same d, n, k, batch size, epochs, learning rate and AuxK
setting (alpha 1/32, k_aux = d/2, which latentsae fixes; a latent is dead after one epoch of samples without
firing). Each training run is a separate subprocess (latentsae changes global torch settings), runs alternate
between the two trainers, and one evaluation scores both: held-out FVU on documents neither trainer saw, the
fraction of latents that never fire on the training documents, and samples/s over the whole training call.
latentsae runs as shipped, on CPU: its DataLoader with num_workers=0 (its default 4 is slower on 2 cores), its
learning-rate schedule with a warm-up of 5% of the steps (its default 1,000 steps would be the whole run here).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bench import common

NAME = "sae_training"
TITLE = "3. SAE training: Prisma vs latentsae"
REPEATS = 2
TARGET_RATIO = 1.5
BASE = {"expansion_factor": 8, "k": 32, "batch_size": 128, "epochs": 40, "aux_alpha": 1 / 32, "seed": 0}
QUICK_BASE = BASE | {"expansion_factor": 2, "k": 16, "epochs": 1}
EXPANSIONS = [2, 4, 8, 16, 32]
SCALING_DOCUMENTS = [10_000, 200_000]
SCALING_N_DOCUMENTS = 10_000
SCALING_EPOCHS = 1


def run(quick: bool = False, cache_dir: Path = common.RESULTS_DIR / "cache") -> dict[str, Any]:
    vectors = common.bbc_vectors(40 if quick else None, cache_dir)
    if quick:
        vectors = common.resample(vectors, 1_000, seed=1)
    train_rows, holdout_rows = common.split_rows(len(vectors))
    train, holdout = vectors[train_rows], vectors[holdout_rows]
    base = QUICK_BASE if quick else BASE
    with tempfile.TemporaryDirectory(prefix="prisma-bench-sae-") as folder:
        workdir = Path(folder)
        comparison = _compare(workdir, train, holdout, base, common.timed_rounds(quick, REPEATS))
        by_n = [
            _compare(
                workdir,
                common.resample(train, 500 if quick else SCALING_N_DOCUMENTS, seed=2),
                holdout,
                base | {"expansion_factor": expansion, "epochs": SCALING_EPOCHS},
                1,
            )
            for expansion in ([4] if quick else EXPANSIONS)
        ]
        by_documents = [
            _compare(workdir, common.resample(train, n, seed=3), holdout, base | {"epochs": 1}, 1)
            for n in ([1_000] if quick else SCALING_DOCUMENTS)
        ]
    return {
        "device": common.device_report(),
        "quick": quick,
        "comparison": comparison,
        "scaling_n": by_n,
        "scaling_documents": by_documents,
    }


def _compare(
    workdir: Path, train: np.ndarray, holdout: np.ndarray, settings: dict[str, Any], repeats: int
) -> dict[str, Any]:
    """Both trainers `repeats` times, alternating who goes first; medians of the speeds, last run's quality."""
    dim = train.shape[1]
    n_latents = settings["expansion_factor"] * dim
    settings = settings | {
        "k_aux": dim // 2,
        "lr": 2e-4 / (n_latents / 2**14) ** 0.5,
        "dead_after": len(train),
    }
    data = workdir / "data.npz"
    np.savez(data, train=train, holdout=holdout)
    runs: dict[str, list[dict[str, Any]]] = {"prisma": [], "latentsae": []}
    for repeat in range(repeats):
        for trainer in ["prisma", "latentsae"] if repeat % 2 == 0 else ["latentsae", "prisma"]:
            runs[trainer].append(_run_worker(trainer, data, settings, workdir))
    summary = {trainer: _summarise(results) for trainer, results in runs.items()}
    return {
        "settings": settings | {"n_latents": n_latents, "d": dim, "n_train": len(train), "n_holdout": len(holdout)},
        "prisma": summary["prisma"],
        "latentsae": summary["latentsae"],
        "ratio": summary["prisma"]["samples_per_s"] / summary["latentsae"]["samples_per_s"],
    }


def _summarise(results: list[dict[str, Any]]) -> dict[str, Any]:
    return results[-1] | {
        "samples_per_s": common.median([r["samples_per_s"] for r in results]),
        "runs_samples_per_s": [r["samples_per_s"] for r in results],
    }


def _run_worker(trainer: str, data: Path, settings: dict[str, Any], workdir: Path) -> dict[str, Any]:
    out = workdir / f"{trainer}.json"
    command = [sys.executable, "-m", "bench.sae_training", "--worker", trainer, "--data", str(data)]
    command += ["--settings", json.dumps(settings), "--result", str(out)]
    env = os.environ | {"TQDM_DISABLE": "1", "WANDB_MODE": "disabled", "PYTHONPATH": str(common.REPO)}
    subprocess.run(command, check=True, cwd=common.REPO, env=env, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


# -- workers: one training run in its own process ----------------------------------------------------------------


def worker(trainer: str, data_file: Path, settings: dict[str, Any]) -> dict[str, Any]:
    data = np.load(data_file)
    train, holdout = data["train"], data["holdout"]
    train_one = _train_prisma if trainer == "prisma" else _train_latentsae
    seconds, (samples, reconstruct, encode) = common.timed(lambda: train_one(train, settings))
    return {"seconds": seconds, "samples": samples, "samples_per_s": samples / seconds} | _evaluate(
        train, holdout, reconstruct, encode
    )


def _train_prisma(train: np.ndarray, settings: dict[str, Any]) -> tuple[int, Any, Any]:
    from prisma_core.sae import SAEConfig
    from prisma_core.sae.train import encode, train_sae

    config = SAEConfig(
        n_features=settings["expansion_factor"] * train.shape[1],
        **{name: settings[name] for name in _PRISMA_FIELDS},
        n_trainings=1,  # one training from random directions, as latentsae trains
        init="random",
        holdout_fraction=0.0,
        device="cpu",
    )
    result = train_sae(train, config)
    model = result.model.eval()

    def reconstruct(x: torch.Tensor) -> torch.Tensor:
        return model(x).recon

    def encode_all(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return encode(model, x)

    return int(result.metrics["steps"]) * min(config.batch_size, len(train)), reconstruct, encode_all


_PRISMA_FIELDS = ("k", "k_aux", "aux_alpha", "epochs", "batch_size", "lr", "dead_after", "seed")


class _Epochs(torch.utils.data.Dataset):
    """`epochs` passes over the rows of x as one dataset: latentsae's trainer makes a single pass."""

    def __init__(self, x: torch.Tensor, epochs: int) -> None:
        self.x = x
        self.epochs = epochs

    def __len__(self) -> int:
        return self.epochs * len(self.x)

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.x[index % len(self.x)]


def _train_latentsae(train: np.ndarray, settings: dict[str, Any]) -> tuple[int, Any, Any]:
    from latentsae import SaeConfig, TrainConfig
    from latentsae.trainer import SaeTrainer

    torch.manual_seed(settings["seed"])
    dim = train.shape[1]
    steps = settings["epochs"] * len(train) // settings["batch_size"]
    with tempfile.TemporaryDirectory(prefix="latentsae-") as checkpoints:
        config = TrainConfig(
            SaeConfig(expansion_factor=settings["expansion_factor"], k=settings["k"]),
            d_in=dim,
            batch_size=settings["batch_size"],
            lr=settings["lr"],
            lr_warmup_steps=max(1, steps // 20),
            auxk_alpha=settings["aux_alpha"],
            dead_feature_threshold=settings["dead_after"] * dim,  # it counts elements (rows x d), not rows
            save_every=10**9,
            num_workers=0,
            log_to_wandb=False,
            checkpoints_directory=checkpoints,
        )
        trainer = SaeTrainer(config, _Epochs(torch.from_numpy(train), settings["epochs"]), torch.device("cpu"))
        with contextlib.redirect_stdout(sys.stderr):
            trainer.fit()
    model = trainer.sae.eval()

    def reconstruct(x: torch.Tensor) -> torch.Tensor:
        return model(x).sae_out

    def encode_all(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with torch.no_grad():
            values, indices = model.encode(torch.from_numpy(x))
        return values.numpy(), indices.numpy()

    return settings["epochs"] * len(train), reconstruct, encode_all


def _evaluate(train: np.ndarray, holdout: np.ndarray, reconstruct: Any, encode: Any) -> dict[str, float]:
    """The same scoring for both: FVU on the held-out set around its own mean, never-firing latents on train."""
    with torch.no_grad():
        recon = reconstruct(torch.from_numpy(holdout)).double().numpy()
    x = holdout.astype(np.float64)
    fvu = ((x - recon) ** 2).sum() / ((x - x.mean(axis=0)) ** 2).sum()
    values, indices = encode(train)
    fired = np.unique(indices[values > 0])
    return {
        "fvu_holdout": float(fvu),
        "fired_latents": len(fired),
        "mean_l0_train": float((values > 0).sum(axis=1).mean()),
    }


def markdown(result: dict[str, Any]) -> str:
    c = result["comparison"]
    s = c["settings"]
    head = ["trainer", "samples/s (median)", "seconds", "held-out FVU", "dead fraction", "mean L0"]
    table = common.markdown_table(head, [_row(name, c) for name in ("prisma", "latentsae")])
    met = (
        c["ratio"] >= TARGET_RATIO
        and c["prisma"]["fvu_holdout"] <= c["latentsae"]["fvu_holdout"]
        and _dead(c, "prisma") <= _dead(c, "latentsae")
    )
    scaling_head = [
        "n (expansion)",
        "documents",
        "Prisma samples/s",
        "latentsae samples/s",
        "ratio",
        "FVU Prisma",
        "FVU latentsae",
        "dead Prisma",
        "dead latentsae",
    ]
    by_n = _scaling_table(scaling_head, result["scaling_n"])
    by_docs = _scaling_table(scaling_head, result["scaling_documents"])
    return f"""Real BBC embeddings ({s["n_train"]:,} training documents, {s["n_holdout"]} held out), d={s["d"]},
n={s["n_latents"]:,}, k={s["k"]}, batch {s["batch_size"]}, {s["epochs"]} epochs, lr {s["lr"]:.2e}, AuxK alpha
{s["aux_alpha"]:.4g} with k_aux={s["k_aux"]}, dead after {s["dead_after"]:,} samples:

{table}

- **Prisma / latentsae samples/s: {c["ratio"]:.2f}x**; target >= {TARGET_RATIO}x at equal or better held-out FVU and
  dead fraction: **{"met" if met else "missed"}**.

Scaling with n ({SCALING_N_DOCUMENTS:,} resampled training vectors, {SCALING_EPOCHS} epochs; FVU on the real
held-out BBC documents):

{by_n}

Scaling with documents (expansion {BASE["expansion_factor"]}, 1 epoch, resampled vectors):

{by_docs}"""


def _scaling_table(header: list[str], comparisons: list[dict[str, Any]]) -> str:
    if not comparisons:
        return "Not measured in this run (see the notes at the end)."
    return common.markdown_table(header, [_scaling_row(r) for r in comparisons])


def _dead(comparison: dict[str, Any], trainer: str) -> float:
    return 1.0 - comparison[trainer]["fired_latents"] / comparison["settings"]["n_latents"]


def _row(trainer: str, comparison: dict[str, Any]) -> list[Any]:
    r = comparison[trainer]
    return [trainer, r["samples_per_s"], r["seconds"], r["fvu_holdout"], _dead(comparison, trainer), r["mean_l0_train"]]


def _scaling_row(comparison: dict[str, Any]) -> list[Any]:
    s = comparison["settings"]
    p, lat = comparison["prisma"], comparison["latentsae"]
    return [
        f"{s['n_latents']:,} ({s['expansion_factor']})",
        f"{s['n_train']:,}",
        p["samples_per_s"],
        lat["samples_per_s"],
        comparison["ratio"],
        p["fvu_holdout"],
        lat["fvu_holdout"],
        _dead(comparison, "prisma"),
        _dead(comparison, "latentsae"),
    ]


def main() -> None:
    arguments = common.parser(__doc__.splitlines()[0])
    arguments.add_argument("--worker", choices=["prisma", "latentsae"], help=argparse.SUPPRESS)
    arguments.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    arguments.add_argument("--settings", help=argparse.SUPPRESS)
    arguments.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = arguments.parse_args()
    if args.worker:
        args.result.write_text(json.dumps(worker(args.worker, args.data, json.loads(args.settings))))
        return
    result = run(args.quick, args.cache)
    common.publish(NAME, result, args, markdown)


if __name__ == "__main__":
    main()
