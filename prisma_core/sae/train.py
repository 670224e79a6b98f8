"""Training loop of the TopK SAE (`train_on`, one for vectors in memory and vectors read a slice at a time, see
`TrainingRows`): holdout split, the starting point (`initial`), AuxK, decoder constraints, metrics; several trainings
compared and their shared features kept (`consensus`)."""

import functools
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Protocol, TypeVar

import numpy as np
import scipy.sparse as sp
import torch
from threadpoolctl import threadpool_limits

from prisma_core.errors import TrainingError
from prisma_core.progress import Progress, ProgressCallback, ignore_progress
from prisma_core.sae import consensus
from prisma_core.sae.adam import Adam
from prisma_core.sae.config import POLISH_LR_SHARE, SAEConfig, check_config
from prisma_core.sae.initial import initial_model
from prisma_core.sae.loss import fvu, matryoshka_fvu, prefix_reconstructions, sae_loss, topk_aux_loss
from prisma_core.sae.model import TopKSAE
from prisma_core.sae.moments import Moments
from prisma_core.sae.weights import codes_matrix

STAGE = "train_sae"
MATCH_SAMPLE = 20_000
"""Training documents whose codes match the features of the trainings compared."""
EPOCH_HOLDOUT_SAMPLE = 1024
"""Held-out documents scored at the end of every epoch (all of them are scored once training ends)."""
HISTORY_POINTS = 100
"""About this many history entries (and progress reports) per run, whatever its length."""
NO_HOLDOUT_VARIANCE = "the held-out documents do not vary: no variance to explain"
DIVERGED = (
    "Training diverged: the SAE's weights became NaN or infinite, so nothing was saved. Lower the step size "
    "(learning rate) or the step size limit and train again."
)
NO_VARIANCE = (
    "All embeddings are identical (no variance to explain), so there is nothing to learn: the documents are probably "
    "all the same text."
)
EpochBatches = Callable[[int], Iterator[torch.Tensor]]
"""batch size -> one epoch of shuffled training batches [batch, d], scaled, on the training device."""
Start = Callable[[SAEConfig, torch.Generator], TopKSAE]
"""A training's initial model (on the training device, scaled units) for these settings, from a seeded generator."""
Fit = Callable[[TopKSAE, SAEConfig, torch.Generator, ProgressCallback], dict[str, Any]]
"""Trains a model in place for config.epochs, its batches shuffled by the generator; returns `optimise`'s record."""
T = TypeVar("T")
MAX_PASSAGE_ROWS = 200_000
"""Passages (`PassageRows`) training takes at most: a seeded sample of them beyond (300 MB of float32 vectors)."""


class PassageRows(NamedTuple):
    """Passages of the documents (windows of a few sentences, embedded in the same pass as the documents), which
    train the SAE beside the documents: a corpus of a few hundred long documents has ten times more passages, and
    features learnt from them come back more often and explain more (BENCHMARKS.md section 7)."""

    vectors: np.ndarray
    """[m, d] float32, in the documents' embedding space."""
    document: np.ndarray
    """[m] int: the position (row of the embeddings) of the document each passage comes from."""


@dataclass
class TrainResult:
    """A trained SAE, the settings that made it (lr, k_aux, dead_after resolved) and how well it did."""

    model: TopKSAE
    """On the CPU, whatever device trained it: the features kept from the trainings compared."""
    config: SAEConfig
    metrics: dict[str, float | int | str]
    """fvu_train, fvu_holdout, variance_explained_holdout (NaN without holdout, or when the held-out documents do
    not vary: then fvu_holdout_note says so), dead_fraction (share of latents that fire on no training document),
    mean_l0, n_train, n_holdout, steps, seconds, samples_per_second, device, n_trainings, features_trained
    (features each training learned), features_kept."""
    history: list[dict[str, float]]
    """Averages over every few steps of every training: training (1-based), step (counted over all trainings),
    epoch, loss, fvu, aux_loss, dead_fraction (latents dead for the tracker at that step). Entries that close an
    epoch also carry fvu_holdout (on a sample of held-out docs)."""
    train_index: np.ndarray
    """Row numbers (into the embeddings) of the training documents, ascending."""
    holdout_index: np.ndarray
    """Row numbers of the held-out documents, ascending."""
    found_in: np.ndarray
    """[n_features] int32: in how many of the `config.n_trainings` trainings each kept feature was found."""


class _DeadLatentTracker:
    """Counts, per latent, the training samples seen since it last fired."""

    def __init__(self, n_latents: int, dead_after: int, device: torch.device) -> None:
        self.dead_after = dead_after
        self.samples_since_fired = torch.zeros(n_latents, dtype=torch.long, device=device)

    def update(self, top_values: torch.Tensor, top_indices: torch.Tensor) -> None:
        """top_values, top_indices: [batch, k] of the step just taken."""
        self.samples_since_fired += top_values.shape[0]
        self.samples_since_fired[top_indices[top_values > 0]] = 0

    def dead_mask(self) -> torch.Tensor:
        """[n_latents] bool."""
        return self.samples_since_fired >= self.dead_after


def resolve_device(name: str) -> torch.device:
    """ "auto" -> CUDA if present, then Apple MPS, then CPU; an explicit device must exist."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise TrainingError(f'Device "{name}" was asked for but no CUDA GPU is available; use "auto" or "cpu".')
    if name == "mps" and not torch.backends.mps.is_available():
        raise TrainingError('Device "mps" was asked for but Apple MPS is not available; use "auto" or "cpu".')
    return torch.device(name)


class TrainingRows(Protocol):
    """The rows one training loop (`train_on`) learns from, whatever holds them: an array in memory (`train_sae`) or
    stored vectors read a slice at a time (`prisma_core.sae.stream`). Rows are scaled by `scale`; rows 0 ..
    n_train - 1 are the training documents in position order, any after them their passages."""

    dim: int
    train_index: np.ndarray
    """Positions of the training documents, ascending: an epoch is as many rows as there are of them."""
    holdout_index: np.ndarray
    """Positions of the held-out documents, ascending."""
    n_rows: int
    """Rows an epoch draws from: the training documents and their passages."""
    scale: float
    """The factor that gives the training documents unit mean squared norm (`input_scale`)."""
    holdout_sample: torch.Tensor
    """Held-out documents scored every epoch, scaled, on the training device (`holdout_sample`)."""

    def scaled(self, picked: np.ndarray) -> torch.Tensor:
        """The rows at these row numbers, scaled, on the CPU: [m, d]."""
        ...

    def epoch(self, generator: torch.Generator, batch_size: int) -> Iterator[torch.Tensor]:
        """One epoch of shuffled batches [batch, d] of the rows, scaled, on the training device."""
        ...

    def final_metrics(self, model: TopKSAE) -> dict[str, float | int | str]:
        """`TrainResult.metrics` of the trained model on the original (unscaled) documents."""
        ...


def train_sae(
    embeddings: np.ndarray,
    config: SAEConfig,
    progress: ProgressCallback = ignore_progress,
    should_stop: Callable[[], bool] | None = None,
    passages: PassageRows | None = None,
) -> TrainResult:
    """Train a TopK SAE on embeddings [n_documents, d] (float32) and, when given, the passages of the training
    documents (never those of held-out documents). An epoch is as many rows as there are training documents, drawn
    from the documents and their passages, so passages add variety, not time.

    Raises TrainingError when the data or settings make training impossible (see `check_config`), and
    TrainingError("... cancelled ...") as soon as `should_stop()` returns True: a cancelled run returns nothing.
    Inputs are scaled to unit mean squared norm for training (so the defaults suit any embedding model) and the
    scale is folded back into b_pre and b_enc, so the returned model takes and returns the original vectors.
    """
    started = time.perf_counter()
    data = _validated(embeddings)
    config, device, train_index, holdout_index = prepare(config, *data.shape)
    scale = input_scale(Moments.of(data[train_index]))
    rows = np.concatenate([data[train_index], training_passages(passages, train_index, config.seed, data.shape[1])])
    x_holdout_sample = holdout_sample(data[holdout_index[:EPOCH_HOLDOUT_SAMPLE]], scale, device)
    x_rows = torch.from_numpy(rows * scale).to(device)
    in_memory = _InMemoryRows(data, x_rows, train_index, holdout_index, scale, x_holdout_sample)
    return train_on(in_memory, config, device, progress, should_stop, started)


def train_on(
    rows: TrainingRows,
    config: SAEConfig,
    device: torch.device,
    progress: ProgressCallback,
    should_stop: Callable[[], bool] | None,
    started: float,
) -> TrainResult:
    """The training loop, one for every kind of rows: the trainings compared (`train_compared`), each from its seeded
    initial model, trained `optimise`'s way on the rows' epochs, the scale folded back and the metrics taken.
    `config`: resolved (`prepare`); `started`: when the training began (its seconds are counted from there)."""
    n_train = len(rows.train_index)

    def start(settings: SAEConfig, generator: torch.Generator) -> TopKSAE:
        return initial_model(rows.dim, rows.n_rows, settings, generator, rows.scaled).to(device)

    def fit(model: TopKSAE, settings: SAEConfig, generator: torch.Generator, report: ProgressCallback) -> dict:
        epochs = functools.partial(rows.epoch, generator)
        return optimise(model, epochs, n_train, rows.holdout_sample, settings, report, should_stop)

    match_rows = rows.scaled(match_sample(n_train, config.seed)).to(device)
    model, found_in, loop = train_compared(start, fit, config, match_rows, progress)
    fold_input_scale(model, rows.scale)
    metrics = rows.final_metrics(model) | {"passages_trained": rows.n_rows - n_train}
    history = loop.pop("history")
    metrics |= loop | {"seconds": time.perf_counter() - started}
    return TrainResult(model.cpu(), config, metrics, history, rows.train_index, rows.holdout_index, found_in)


@dataclass(frozen=True)
class _InMemoryRows:
    """`TrainingRows` of an array held in memory: the scaled rows on the training device."""

    data: np.ndarray
    """Every document, [n_documents, d], original units."""
    x_rows: torch.Tensor
    train_index: np.ndarray
    holdout_index: np.ndarray
    scale: float
    holdout_sample: torch.Tensor

    @property
    def dim(self) -> int:
        return self.data.shape[1]

    @property
    def n_rows(self) -> int:
        return len(self.x_rows)

    def scaled(self, picked: np.ndarray) -> torch.Tensor:
        return self.x_rows.cpu()[picked]

    def epoch(self, generator: torch.Generator, batch_size: int) -> Iterator[torch.Tensor]:
        order = torch.randperm(len(self.x_rows), generator=generator).to(self.x_rows.device)
        for first in range(0, len(self.x_rows) - batch_size + 1, batch_size):
            yield self.x_rows[order[first : first + batch_size]]

    def final_metrics(self, model: TopKSAE) -> dict[str, float | int | str]:
        return _final_metrics(model, self.data, self.train_index, self.holdout_index)


def training_passages(passages: PassageRows | None, train_index: np.ndarray, seed: int, dim: int) -> np.ndarray:
    """The vectors of the training documents' passages [m, d] (at most MAX_PASSAGE_ROWS, a seeded sample), leaving
    out documents of a single passage (its vector is the document's own, already a row)."""
    if passages is None or len(passages.vectors) == 0:
        return np.zeros((0, dim), np.float32)
    counts = np.bincount(passages.document, minlength=int(passages.document.max()) + 1)
    kept = np.flatnonzero(np.isin(passages.document, train_index) & (counts[passages.document] > 1))
    if len(kept) > MAX_PASSAGE_ROWS:
        kept = np.sort(np.random.default_rng(seed).choice(kept, MAX_PASSAGE_ROWS, replace=False))
    check_finite(int((~np.isfinite(passages.vectors[kept])).any(axis=1).sum()))
    return np.asarray(passages.vectors[kept], dtype=np.float32)


def prepare(config: SAEConfig, n_documents: int, dim: int) -> tuple[SAEConfig, torch.device, np.ndarray, np.ndarray]:
    """The checked, resolved config, the device and the holdout split (train rows, held-out rows), drawn from the
    run's seed: the same whichever way the vectors are read, and shared by every training compared."""
    check_config(config, n_documents, dim)
    config = config.resolved(n_documents)
    device = resolve_device(config.device)
    return config, device, *_split(n_documents, config, torch.Generator().manual_seed(config.seed))


def match_sample(n_train: int, seed: int) -> np.ndarray:
    """The training rows (at most MATCH_SAMPLE, ascending, seeded) whose codes match the trainings' features."""
    if n_train <= MATCH_SAMPLE:
        return np.arange(n_train)
    return np.sort(np.random.default_rng(seed).choice(n_train, MATCH_SAMPLE, replace=False))


def train_compared(
    start: Start, fit: Fit, config: SAEConfig, match_rows: torch.Tensor, progress: ProgressCallback
) -> tuple[TopKSAE, np.ndarray, dict[str, Any]]:
    """`config.n_trainings` trainings at `config.compared_k()` active features, each from its own seed, combined
    into the SAE of the features most of them find (`consensus.combine`), then polished: trained together for
    `config.polish_epochs` at k active features and a tenth of the learning rate. Returns the SAE (scaled units,
    training device), in how many trainings each of its features was found, and the joint record (history, steps,
    samples_per_second, device, counts). match_rows: scaled training vectors [m, d] on the training device, whose
    codes match the features."""
    compared = replace(config, k=config.compared_k())
    seeds = consensus.training_seeds(config.seed, config.n_trainings + 1)
    parts = _Parts(progress, config.n_trainings + (config.polish_epochs > 0))

    def train(number: int) -> tuple[TopKSAE, dict[str, Any]]:
        generator = torch.Generator().manual_seed(seeds[number])
        model = start(compared, generator)
        return model, fit(model, compared, generator, parts.part(number, f"Training {number + 1} of {len(seeds) - 1}"))

    trainings = _run_at_once(train, config.n_trainings, _workers(match_rows.device, config.n_trainings))
    models, loops = [model for model, _ in trainings], [loop for _, loop in trainings]
    if len(models) == 1:
        model, found_in = models[0], np.ones(models[0].n_latents, dtype=np.int32)
    else:
        codes = [codes_matrix(*_encoded(model, match_rows), model.n_latents) for model in models]
        model, found_in = consensus.combine(models, codes, config.kept_at_least(), config.match_at, config.k)
    model.k = config.k
    if config.polish_epochs:
        lr = config.lr * POLISH_LR_SHARE
        polish = replace(config, n_features=model.n_latents, epochs=config.polish_epochs, lr=lr)
        report = parts.part(config.n_trainings, "Fitting the features together")
        loops.append(fit(model, polish, torch.Generator().manual_seed(seeds[-1]), report))
    counts = {
        "n_trainings": len(models),
        "features_trained": config.n_features,
        "features_kept": model.n_latents,
        "found_in_all": int((found_in == len(models)).sum()),
    }
    return model, found_in, _joint_record(loops) | counts


def _workers(device: torch.device, n_trainings: int) -> int:
    """Trainings run at once: one per core this process may use on a CPU (OMP_NUM_THREADS when set: the share of the
    CPUs it was given), one at a time on a GPU. The SAEs are small, so a core per training does more than two cores
    on one training's small matrix products."""
    if device.type != "cpu":
        return 1
    share = os.environ.get("OMP_NUM_THREADS", "")
    cores = int(share) if share.isdigit() and int(share) > 0 else len(os.sched_getaffinity(0))
    return max(1, min(cores, n_trainings))


def _run_at_once(train: Callable[[int], T], count: int, workers: int) -> list[T]:
    """[train(0), ..., train(count - 1)], `workers` at a time, each on one thread of torch's and of the BLAS and
    OpenMP pools (threads set back after): each training computes as it would alone on one thread, so its result
    does not depend on how many run beside it."""
    if workers == 1:
        return [train(number) for number in range(count)]
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1), ThreadPoolExecutor(workers, thread_name_prefix="sae-training") as pool:
            return list(pool.map(train, range(count)))
    finally:
        torch.set_num_threads(before)


class _Parts:
    """Progress of the trainings (some running at once) and the polish, reported as one sum."""

    def __init__(self, progress: ProgressCallback, count: int) -> None:
        self.progress, self.lock = progress, threading.Lock()
        self.done, self.totals = [0] * count, [0] * count

    def part(self, number: int, name: str) -> ProgressCallback:
        if len(self.done) == 1:
            return self.progress

        def report(update: Progress) -> None:
            with self.lock:
                self.done[number], self.totals[number] = update.done, update.total
                first = next(total for total in self.totals if total)  # parts not started yet count as this much
                done, total = sum(self.done), sum(total or first for total in self.totals)
            self.progress(Progress(update.stage, done, total, f"{name} · {update.message}", update.metrics))

        return report


def _joint_record(loops: list[dict[str, Any]]) -> dict[str, Any]:
    """The trainings' histories one after the other (steps counted over all of them), their steps and speed."""
    history, offset = [], 0
    for number, loop in enumerate(loops, start=1):
        history += [entry | {"training": number, "step": entry["step"] + offset} for entry in loop["history"]]
        offset += loop["steps"]
    seconds = sum(loop["seconds"] for loop in loops)
    return {
        "history": history,
        "steps": offset,
        "samples_per_second": sum(loop["samples"] for loop in loops) / seconds if seconds else 0.0,
        "device": loops[0]["device"],
    }


def _encoded(model: TopKSAE, x: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    with torch.no_grad():
        values, indices = model.encode_topk(x)
    return values.cpu().numpy(), indices.cpu().numpy()


def holdout_sample(holdout: np.ndarray, scale: float, device: torch.device) -> torch.Tensor:
    """The held-out documents scored every epoch, scaled; none when fewer than two or identical."""
    kept = holdout if len(holdout) > 1 and has_variance(holdout) else holdout[:0]
    return torch.from_numpy(kept * scale).to(device)


def encode(model: TopKSAE, embeddings: np.ndarray, batch_size: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """Sparse codes of all documents: embeddings [n, d] -> (values float32 [n, k], indices int32 [n, k]).

    Each row lists its k active features, largest activation first.
    """
    device = model.W_dec.device
    values, indices = [], []
    with torch.no_grad():
        for start in range(0, len(embeddings), batch_size):
            x = torch.as_tensor(np.asarray(embeddings[start : start + batch_size], dtype=np.float32), device=device)
            batch_values, batch_indices = model.encode_topk(x)
            values.append(batch_values.cpu().numpy())
            indices.append(batch_indices.cpu().numpy().astype(np.int32))
    if not values:
        return np.zeros((0, model.k), np.float32), np.zeros((0, model.k), np.int32)
    return np.concatenate(values), np.concatenate(indices)


def _validated(embeddings: np.ndarray) -> np.ndarray:
    data = np.asarray(embeddings, dtype=np.float32)
    if data.ndim != 2:
        raise TrainingError(f"Embeddings must be a table of documents x dimensions, got shape {data.shape}.")
    check_finite(int((~np.isfinite(data)).any(axis=1).sum()))
    if len(data) > 1 and not has_variance(data):
        raise TrainingError(NO_VARIANCE)
    return data


def check_finite(bad_rows: int) -> None:
    """Raises TrainingError when some embeddings (bad_rows of them) hold NaN or infinite values."""
    if bad_rows:
        raise TrainingError(f"{bad_rows} embeddings contain NaN or infinite values; embed those documents again.")


def has_variance(x: np.ndarray) -> bool:
    """Whether the rows of x [m, d] differ by more than float rounding (see `Moments.has_variance`)."""
    return Moments.of(x).has_variance()


def _split(n_documents: int, config: SAEConfig, generator: torch.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Random holdout of documents: (train rows, holdout rows), each ascending."""
    _, n_holdout = config.split_sizes(n_documents)
    order = torch.randperm(n_documents, generator=generator).numpy()
    return np.sort(order[n_holdout:]), np.sort(order[:n_holdout])


def input_scale(train: Moments) -> float:
    """Factor that gives the training vectors unit mean squared norm."""
    return float(1.0 / np.sqrt(train.squared_norm / train.count))


def optimise(
    model: TopKSAE,
    epoch_batches: EpochBatches,
    n_train: int,
    x_holdout_sample: torch.Tensor,
    config: SAEConfig,
    progress: ProgressCallback,
    should_stop: Callable[[], bool] | None,
) -> dict[str, Any]:
    """Run all epochs in place on `model` (on the training device); returns history, steps, samples, seconds and
    device.
    Every epoch takes n_train // batch_size steps of `epoch_batches`."""
    started = time.perf_counter()
    device = model.W_dec.device
    batch_size = min(config.batch_size, n_train)
    steps_per_epoch = n_train // batch_size
    total_steps = config.epochs * steps_per_epoch
    log_every = max(1, total_steps // HISTORY_POINTS)
    optimizer = Adam(model.parameters(), lr=config.lr)
    tracker = _DeadLatentTracker(model.n_latents, config.dead_after, device)
    prefixes = config.prefixes()
    history: list[dict[str, float]] = []
    sums = torch.zeros(3, device=device)
    since_log = 0
    step = 0
    for epoch in range(1, config.epochs + 1):
        batches = epoch_batches(batch_size)
        for batch_number in range(steps_per_epoch):
            if should_stop is not None and should_stop():
                raise TrainingError(f"Training was cancelled at step {step} of {total_steps}; nothing was saved.")
            sums += _train_step(model, optimizer, tracker, next(batches), config, prefixes)
            step += 1
            since_log += 1
            epoch_done = batch_number == steps_per_epoch - 1
            if step % log_every and not epoch_done:
                continue
            loss, recon_fvu, aux = (sums / since_log).tolist()
            entry = {
                "step": step,
                "epoch": epoch,
                "loss": loss,
                "fvu": recon_fvu,
                "aux_loss": aux,
                "dead_fraction": tracker.dead_mask().float().mean().item(),
            }
            if epoch_done and len(x_holdout_sample):
                entry["fvu_holdout"] = _fvu_of(model, x_holdout_sample)
            history.append(entry)
            progress(Progress(STAGE, step, total_steps, f"Epoch {epoch} of {config.epochs}", _progress_metrics(entry)))
            sums.zero_()
            since_log = 0
        batches.close()
    seconds = time.perf_counter() - started
    return {"history": history, "steps": step, "samples": step * batch_size, "seconds": seconds, "device": str(device)}


def autocast_dtype(device: torch.device) -> torch.dtype | None:
    """bf16 mixed precision on CUDA (matrix products in bf16, weights, optimiser state and loss sums in fp32);
    full fp32 elsewhere: CPUs and Apple GPUs gain little from it for a model this small."""
    return torch.bfloat16 if device.type == "cuda" else None


def _train_step(
    model: TopKSAE,
    optimizer: Adam,
    tracker: _DeadLatentTracker,
    x: torch.Tensor,
    config: SAEConfig,
    prefixes: tuple[int, ...],
) -> torch.Tensor:
    """One Adam step on batch x [batch, d]; returns detached (loss, fvu of all features, aux_loss) [3]."""
    dtype = autocast_dtype(x.device)
    with torch.autocast(x.device.type, dtype=dtype, enabled=dtype is not None):
        pre_acts = model.pre_activations(x)
        top_values, top_indices = pre_acts.topk(model.k, dim=1, sorted=False)
        reconstructions = prefix_reconstructions(
            model.W_dec, model.b_pre, top_values, top_indices, prefixes, config.broadest_one
        ).float()
        recon = reconstructions[-1]
        recon_fvu = fvu(x, recon)
        objective = matryoshka_fvu(x, reconstructions)
        aux = topk_aux_loss(x - recon, pre_acts, tracker.dead_mask(), model.W_dec, config.k_aux)
        loss = sae_loss(objective, aux.float(), config.aux_alpha)
    optimizer.zero_grad()
    loss.backward()
    model.project_decoder_grad()
    torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
    optimizer.step()
    model.normalize_decoder()
    tracker.update(top_values, top_indices)
    return torch.stack([loss, recon_fvu, aux]).detach()


def _progress_metrics(entry: dict[str, float]) -> dict[str, float]:
    return {key: entry[key] for key in ("loss", "fvu", "dead_fraction", "fvu_holdout") if key in entry}


def _fvu_of(model: TopKSAE, x: torch.Tensor, batch_size: int = 4096) -> float:
    """FVU of the whole set x [m, d] (variance around the set's mean), reconstructed in batches."""
    with torch.no_grad():
        batches = (x[start : start + batch_size] for start in range(0, len(x), batch_size))
        recon = torch.cat([model.decode(*model.encode_topk(batch)) for batch in batches])
        return fvu(x, recon).item()


def fold_input_scale(model: TopKSAE, scale: float) -> None:
    """Make a model trained on scale * x take x: TopK and ReLU commute with positive scaling, so dividing both
    biases by `scale` gives activations / scale and reconstructions of x itself, with the same directions."""
    with torch.no_grad():
        model.b_pre.div_(scale)
        model.b_enc.div_(scale)


def _final_metrics(
    model: TopKSAE, data: np.ndarray, train_index: np.ndarray, holdout_index: np.ndarray
) -> dict[str, float | int | str]:
    device = model.W_dec.device
    x_train = torch.from_numpy(data[train_index]).to(device)
    values, indices = encode(model, data[train_index])
    active = values > 0
    fired = np.zeros(model.n_latents, dtype=bool)
    fired[indices[active]] = True
    holdout = data[holdout_index]
    scored = len(holdout) > 1 and has_variance(holdout)
    fvu_holdout = _fvu_of(model, torch.from_numpy(holdout).to(device)) if scored else np.nan
    n_active = int(active.sum())
    return quality_metrics(_fvu_of(model, x_train), fvu_holdout, fired, n_active, len(train_index), len(holdout_index))


def quality_metrics(
    fvu_train: float, fvu_holdout: float, fired: np.ndarray, n_active: int, n_train: int, n_holdout: int
) -> dict[str, float | int | str]:
    """The metrics of a trained SAE (see `TrainResult.metrics`) from its FVUs (fvu_holdout NaN when the held-out
    documents were not scored), which latents fired on a training document and the activations counted over them.

    A training FVU that is NaN or infinite means training diverged: TrainingError, so no broken run is saved."""
    if not np.isfinite(fvu_train):
        raise TrainingError(DIVERGED)
    return {
        "fvu_train": fvu_train,
        "fvu_holdout": fvu_holdout,
        "variance_explained_holdout": 1.0 - fvu_holdout,
        **({"fvu_holdout_note": NO_HOLDOUT_VARIANCE} if n_holdout and np.isnan(fvu_holdout) else {}),
        "dead_fraction": float(1.0 - fired.mean()),
        "mean_l0": n_active / n_train,
        "n_train": n_train,
        "n_holdout": n_holdout,
    }


def feature_codes(model: TopKSAE, embeddings: np.ndarray, batch_size: int = 4096) -> sp.csr_matrix:
    """Sparse codes of all documents as features: embeddings [n, d] -> [n, n_features], k active per row.

    The one place where the SAE's latents become the features every layer above speaks of (feature i is latent i,
    and there are as many features as latents)."""
    values, indices = encode(model, embeddings, batch_size)
    return codes_matrix(values, indices, model.n_latents)
