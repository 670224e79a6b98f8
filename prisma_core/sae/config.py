"""The one configuration of SAE training, its checks against a corpus, and defaults that suit a corpus size."""

import math
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from prisma_core.config_docs import DEVICE_CHOICES, CheckedConfig, setting
from prisma_core.errors import SettingsError, TrainingError

MIN_TRAIN_DOCUMENTS = 20
"""Below this many training documents there is nothing to learn features from."""
FEW_DOCUMENTS = 500
"""Below this many documents features tend to describe single documents."""
DOCUMENTS_PER_FEATURE = 12
"""The suggested number of features gives each feature about this many training documents: with the trainings'
k_compared = 16 active features per document, each feature fires on about 190 of them per epoch, enough that it
describes something many documents share, so most trainings find it (BENCHMARKS.md section 7: at one feature per
24 documents and k = 4, runs kept 30-37% of the detail; per 8, fewer features came back)."""
MIN_FIRES_PER_EPOCH = 8
"""Below this many fires per feature and epoch, features memorise single documents or stay dead (a warning)."""
SUGGESTED_K = 32
"""Active features per document of a suggested run (fewer when the run has fewer than 4 x 32 features): the
features the trainings agree on are few and broad, and a document needs about 32 of them to keep about half of what
sets it apart (BENCHMARKS.md section 7); its strongest few are the ones shown."""
SUGGESTED_TRAININGS = 7
"""Trainings compared by a suggested run: with 7, a feature kept is the average of at least 4 trainings' versions of
it, and comes back when the run is trained again with another seed (with 3, a quarter fewer did on short texts)."""
FEATURE_STEP = 16
"""The suggested number of features is a multiple of this."""
MIN_SUGGESTED_FEATURES = 32
PASSAGES_PER_DOCUMENT = 2.0
"""A suggested run trains on the passages too when the documents have at least this many on average (long documents:
BBC articles have 11, the demo's notes 7); passages of a few short texts cut in two (AG News: 1.14 per document) made
fewer features come back (by documents 69% with them, 77% without; BENCHMARKS.md section 7)."""
PASSAGE_FEATURE_GAIN = 2.0
"""With passages, up to this many times the features of the documents alone: BBC News at 320 features kept 64% of
the held-out detail with 81% of activity recurring, at 160 60% and 79%, at 480 65% and 79% with a wider gap."""
MIN_FEATURES_WITH_PASSAGES = 64
"""A small corpus of long documents gets up to this many features when its documents and passages give
DOCUMENTS_PER_FEATURE rows to each (the 150-note demo: about 1,100 rows, 64 features keep a third of its held-out
detail and most come back; 32 kept a quarter, BENCHMARKS.md section 7)."""
MAX_SUGGESTED_FEATURES = 4096
TARGET_SAMPLES = 16_000
"""Documents (counting repeats) the suggested epochs aim to show each training: 8 epochs of BBC News (more on small
corpora, where MIN_STEPS decides). With several trainings averaged, more epochs kept no more detail and brought no
more features back (BENCHMARKS.md section 7)."""
MIN_STEPS = 150
"""Fewest optimiser steps the suggested epochs allow; far fewer leave the reconstruction poor."""
MAX_SUGGESTED_EPOCHS = 20
"""More epochs on a small corpus pull the features away from what the trainings share (BENCHMARKS.md section 7)."""
DEAD_AFTER_MAX = 20_000
"""dead_after defaults to one epoch of documents, but at most this many on large corpora."""
REFERENCE_LR = 1e-3
REFERENCE_LATENTS = 8192
"""lr = REFERENCE_LR / sqrt(n_features / REFERENCE_LATENTS) when lr is None: the 1/sqrt(n) scaling of Gao et al.
(2024) with a larger constant (7e-4 at 16,384 latents where they use 2e-4): theirs needed about three times the
epochs for the same held-out FVU on corpora of a few thousand documents."""
PREFIX_RATIO = 8
"""Each nested feature group is this many times smaller than the next."""
MAX_FEATURES = 98_304
"""More features than this (256 per dimension of the default model) are refused outright (before any work); below
it, the memory check in `check_config` decides."""
MAX_TRAININGS = 15
MATCH_AT = 0.5
"""Activation correlation at which two trainings' features count as one when the trainings are compared: at 16
active features per document a feature's activations are shared with its neighbours, so one concept correlates at
0.5-0.7 between trainings; averaged over the trainings that found it, it then recurs at the stricter 0.7 of
`prisma_core.sae.recurrence` in a run trained with another seed (BENCHMARKS.md section 7)."""
POLISH_LR_SHARE = 0.1
"""The polish (see `SAEConfig.polish_epochs`) steps at this share of the trainings' learning rate: it adjusts the
features the trainings agreed on, it must not move them away."""
MAX_EPOCHS = 1_000
"""More passes than this over the documents are refused: far past what any corpus needs (the suggested settings use
at most 20), and a mistyped count would train for days."""
MAX_K = 4_096
TRAINING_BYTES_PER_WEIGHT = 16
"""float32 bytes held per encoder/decoder weight while training: the weight, its gradient and Adam's two moments."""
VECTOR_BYTES = 4
"""Bytes per vector component (float32)."""
INIT_CHOICES = ("data", "random")
_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


@dataclass(frozen=True)
class SAEConfig(CheckedConfig):
    """Settings of one SAE training run. Fields left None are resolved by `resolved()` and recorded with the run."""

    settings_name = "SAE"

    n_features: int = setting(
        256,
        label="Features",
        minimum=2,
        maximum=MAX_FEATURES,
        step=FEATURE_STEP,
        help="How many concepts the model may learn. The suggested number comes from the number of documents, so "
        "that each feature describes something many documents share. More features give finer concepts, which come "
        "back less reliably when the model is trained again.",
        doc="Features (latents) each training learns. The run keeps those most trainings find "
        "(`n_trainings`), so it may end with fewer.",
    )
    k: int = setting(
        SUGGESTED_K,
        label="k (active features per document)",
        minimum=1,
        maximum=MAX_K,
        help="How many features describe each document. Larger keeps more detail of each document; smaller gives "
        "fewer, broader concepts per document. A document's strongest few are the ones shown.",
        doc="Active features per document (the TopK) of the run's SAE: every document is described by exactly "
        "k weighted features. The trainings compared learn with `k_compared`; the polish "
        "(`polish_epochs`) then fits the features they agree on to k.",
    )
    k_compared: int | None = setting(
        None,
        minimum=1,
        maximum=MAX_K,
        empty="k / 2",
        doc="Active features per document while the trainings compared learn (None: half of k). Fewer active "
        "features make the trainings agree on more features; the polish then describes each document by k "
        "of them.",
    )
    n_trainings: int = setting(
        SUGGESTED_TRAININGS,
        label="Trainings compared",
        minimum=1,
        maximum=MAX_TRAININGS,
        help="How many times the model is trained, each time from another random start. Only the features that "
        "most trainings find are kept, and each shows in how many it was found: a concept found every time is one "
        "you will find again. 1 trains once and checks nothing.",
        doc="SAEs trained on the same documents, each with its own seed drawn from `seed`; the run keeps the "
        "features that more than half of them share (matched by their activations at `match_at`, see "
        "`prisma_core.sae.consensus`), with their weights averaged. 1 trains a single SAE and keeps all "
        "its features.",
    )
    match_at: float = setting(
        MATCH_AT,
        above=0.0,
        maximum=1.0,
        doc="Activation correlation (Pearson, over the training documents) at which features of two trainings "
        "count as the same feature when the trainings are compared (see `MATCH_AT`).",
    )
    polish_epochs: int = setting(
        3,
        minimum=0,
        maximum=100,
        doc="Passes over the training documents after the trainings are combined: the features they agree on "
        "are trained together at k active features per document, at a tenth of the learning rate, so they "
        "describe each document as well as they can without moving away from what the trainings found. 0 "
        "skips it.",
    )
    passages: bool = setting(
        True,
        doc="Train on the training documents' passages too (spans of a few sentences, embedded with the "
        "documents), when the dataset has them and its vectors fit in memory: a long document then gives "
        "several rows, and a small corpus gets enough rows for features that explain more and come back "
        "(BENCHMARKS.md section 7). Held-out documents' passages are never used.",
    )
    init: str = setting(
        "data",
        choices=INIT_CHOICES,
        doc='Initial feature directions: "data" starts them at centres of groups of training documents '
        "(k-means, one run per nested feature group, seeded), so the first features start broad and later "
        'ones fine; "random" starts them at random unit directions (SPEC section 3).',
    )
    k_aux: int | None = setting(
        None,
        label="Second-chance features",
        minimum=1,
        maximum=MAX_FEATURES,
        empty="2 k",
        help="Features that have stopped firing get a second chance: this many of them are trained on what the "
        "others miss. Auto is twice k.",
        doc="Dead latents used by the AuxK loss per document; None -> 2 * k, capped at n_features.",
    )
    nested_levels: int = setting(
        4,
        minimum=1,
        maximum=8,
        doc="Matryoshka nesting: the first n_features/8^j features (j = levels-1 ... 1) must also reconstruct "
        "each document on their own, so the first features learn broad concepts and later ones refine "
        "them; 1 turns nesting off.",
    )
    broadest_one: bool = setting(
        True,
        doc="The broadest nested group (the first of `prefixes`) reconstructs each document from its one "
        "strongest feature of the group, as the nearest centre of a k-means would: each broad feature "
        "then stands for one kind of document (a news section) instead of a share of every document. With "
        "k active features a document used all of the group, and no single feature matched a known "
        "category as well (BENCHMARKS.md section 7).",
    )
    aux_alpha: float = setting(
        1 / 32,
        label="Second-chance weight",
        minimum=0.0,
        maximum=10.0,
        number_format="%.5f",
        help="How much weight that second chance gets. 0 turns it off (more features then never fire).",
        doc="Weight of the AuxK loss that revives dead latents; 0 turns it off.",
    )
    epochs: int = setting(
        12,
        label="Epochs",
        minimum=1,
        maximum=MAX_EPOCHS,
        help="How many times each training goes through all documents. Too many on a small dataset makes the "
        "model memorise its documents (overfitting).",
        doc="Passes over the training documents.",
    )
    batch_size: int = setting(
        128,
        label="Batch size",
        minimum=2,
        maximum=65_536,
        help="How many documents the model looks at per training step. The default suits most datasets.",
        doc="Documents per optimiser step (capped at the number of training documents).",
    )
    lr: float | None = setting(
        None,
        label="Step size (learning rate)",
        minimum=1e-6,
        maximum=0.5,
        empty="auto",
        step=1e-4,
        number_format="%.6f",
        help="How big each training step is. Leave it on auto unless training is unstable (then lower it).",
        doc="Adam learning rate (typically 1e-4 to 1e-3); None -> 1e-3 / sqrt(n_features / 8192), i.e. larger "
        "for fewer features.",
    )
    dead_after: int | None = setting(
        None,
        label="Never-firing after (documents)",
        minimum=1,
        maximum=1_000_000_000,
        step=1_000,
        empty="one epoch",
        help="After how many documents without firing a feature counts as never firing and gets the second chance. "
        "Auto is about one pass over the documents.",
        doc="Training samples without firing after which a latent counts as dead (and AuxK starts training "
        "it); None -> one epoch of documents, at most 20,000.",
    )
    holdout_fraction: float = setting(
        0.1,
        label="Share kept aside for checking",
        minimum=0.0,
        maximum=0.89,
        help="The share of documents kept aside to check how well the model describes documents it has not seen. "
        "0 trains on everything but measures nothing.",
        doc="Share of documents held out of training to measure how well the SAE generalises (0 disables it).",
    )
    grad_clip: float = setting(
        1.0,
        label="Step size limit",
        minimum=0.01,
        maximum=100.0,
        help="A safety limit on the size of a training step. The default rarely needs changing.",
        doc="Maximum gradient norm per step.",
    )
    seed: int = setting(
        0,
        label="Seed",
        minimum=0,
        maximum=2**31 - 1,
        help="Any number. The same number, documents and settings give exactly the same result.",
        doc="Seeds the holdout split and, through one seed drawn from it per training, each training's "
        "initialisation and shuffling: same seed, data and device -> same weights.",
    )
    vectors_memory_mb: float = setting(
        256.0,
        minimum=0.0,
        maximum=1_048_576.0,
        doc="Training holds the vectors in memory when they take at most this many MB (float32: 1.5 KB per "
        "document at 384 dimensions, so 256 MB is about 175,000 documents); larger corpora are read from "
        "the vectors table in shuffled slices, holding about this much at a time, so memory stays bounded "
        "whatever the corpus size. 0 always reads in slices. The two ways shuffle differently, so the "
        "same seed gives the same features only on the same side.",
    )
    device: str = setting(
        "auto",
        label="Device",
        choices=DEVICE_CHOICES,
        help="Where training runs: auto picks a GPU when there is one, else the CPU.",
        doc='"auto" (CUDA, then Apple MPS, then CPU), "cpu", "cuda", "cuda:N" or "mps".',
    )

    def other_problems(self) -> list[str]:
        problems = (
            []
            if _DEVICE.match(self.device)
            else [f'device must be "auto", "cpu", "cuda", "cuda:N" or "mps", got "{self.device}"']
        )
        if self.init not in INIT_CHOICES:
            problems.append(f'init must be "data" or "random", got "{self.init}"')
        if self.k_compared is not None and self.k_compared > self.k:
            problems.append(f"k_compared ({self.k_compared}) must be at most k ({self.k})")
        return problems

    def prefixes(self) -> tuple[int, ...]:
        """Sizes of the nested feature groups trained to reconstruct on their own, smallest first, ending with all
        features: e.g. (6, 48, 384, 3072) for 3072 features and 4 levels. Groups of fewer than 2 features are
        skipped."""
        return nested_prefixes(self.n_features, self.nested_levels)

    def compared_k(self) -> int:
        """Active features per document while the trainings compared learn."""
        return self.k_compared if self.k_compared is not None else max(1, self.k // 2)

    def kept_at_least(self) -> int:
        """Trainings a feature must be found in to be kept: more than half of them."""
        return self.n_trainings // 2 + 1

    def split_sizes(self, n_documents: int) -> tuple[int, int]:
        """(training documents, held-out documents); at least one is held out when holdout_fraction > 0."""
        n_holdout = max(1, round(n_documents * self.holdout_fraction)) if self.holdout_fraction > 0 else 0
        return n_documents - n_holdout, n_holdout

    def resolved(self, n_documents: int) -> "SAEConfig":
        """This config with lr, k_aux and dead_after filled in for a corpus of n_documents."""
        n_train, _ = self.split_sizes(n_documents)
        return replace(
            self,
            lr=self.lr if self.lr is not None else REFERENCE_LR / math.sqrt(self.n_features / REFERENCE_LATENTS),
            k_compared=self.compared_k(),
            k_aux=min(self.k_aux if self.k_aux is not None else 2 * self.compared_k(), self.n_features),
            dead_after=self.dead_after if self.dead_after is not None else min(n_train, DEAD_AFTER_MAX),
        )

    def holds_in_memory(self, n_documents: int, dim: int) -> bool:
        """Whether training keeps all n_documents vectors of size dim in memory (see `vectors_memory_mb`)."""
        return n_documents * dim * VECTOR_BYTES <= self.vectors_memory_mb * 2**20

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], dim: int | None = None) -> "SAEConfig":
        """Inverse of to_dict; raises SettingsError naming any unknown setting. Settings recorded by Prisma before
        runs compared several trainings (an `expansion_factor` instead of `n_features`) are read as what they did:
        expansion_factor x dim features, one training, random initial directions; settings recorded before runs were
        polished (no `polish_epochs`) as trainings at k matched at 0.7 and not polished, settings recorded before
        passages were trained on as documents only, and those recorded before `broadest_one` with their broadest group
        using all of its active features."""
        if "expansion_factor" in values:
            values = _before_consensus(values, dim)
        if "polish_epochs" not in values:
            values = {"k_compared": values.get("k", SUGGESTED_K), "match_at": 0.7, "polish_epochs": 0} | dict(values)
        if "passages" not in values:
            values = {"passages": False} | dict(values)
        if "broadest_one" not in values:
            values = {"broadest_one": False} | dict(values)
        return super().from_dict(values)


def nested_prefixes(n_features: int, levels: int) -> tuple[int, ...]:
    """The nested group sizes of `SAEConfig.prefixes` for n_features features."""
    sizes = {n_features // PREFIX_RATIO**level for level in range(levels)}
    return tuple(sorted(size for size in sizes if size >= 2))


def _before_consensus(values: Mapping[str, Any], dim: int | None) -> dict[str, Any]:
    if dim is None:
        raise SettingsError("These SAE settings give an expansion factor; the embedding size is needed to read them.")
    upgraded = {key: value for key, value in values.items() if key != "expansion_factor"}
    return upgraded | {"n_features": int(values["expansion_factor"]) * dim, "n_trainings": 1, "init": "random"}


def check_config(config: SAEConfig, n_documents: int, dim: int) -> list[str]:
    """Warnings (with suggested settings) for training `config` on n_documents vectors of size dim.

    Raises TrainingError, saying what to change, when training is impossible.
    """
    n_features = config.n_features
    n_train, n_holdout = config.split_sizes(n_documents)
    if dim < 1:
        raise TrainingError("The embeddings have no dimensions; embed the dataset again.")
    if n_train < MIN_TRAIN_DOCUMENTS:
        raise TrainingError(
            f"{n_documents} documents leave {n_train} for training after holding out {n_holdout}; an SAE needs at "
            f"least {MIN_TRAIN_DOCUMENTS}. Add documents or lower the holdout fraction."
        )
    if config.k >= n_features:
        raise TrainingError(
            f"k={config.k} active features per document must be fewer than the {n_features} features. Lower k or "
            "raise the number of features."
        )
    _check_memory(config, dim)
    warnings = []
    suggested = suggest_config(n_documents, dim)
    if n_train < FEW_DOCUMENTS:
        warnings.append(
            f"Only {n_train} training documents: features will tend to describe single documents; "
            f"results are more trustworthy from about {FEW_DOCUMENTS} documents on."
        )
    fires_per_epoch = n_train * config.compared_k() / n_features
    if n_features > n_train or fires_per_epoch < MIN_FIRES_PER_EPOCH:
        remedy = (
            f"Suggested: {suggested.n_features} features."
            if suggested.n_features < n_features
            else "Add documents for features that generalise."
        )
        warnings.append(
            f"{n_features} features for {n_train} training documents (each fires on about {fires_per_epoch:.1f} "
            f"documents per epoch): many features will memorise single documents or stay dead. {remedy}"
        )
    if config.k > n_features // 4:
        warnings.append(
            f"k={config.k} is more than a quarter of the {n_features} features, so codes are barely sparse. "
            f"Suggested: k={max(1, n_features // 4)}."
        )
    steps = config.epochs * max(1, n_train // min(config.batch_size, n_train))
    if steps < MIN_STEPS // 2:
        warnings.append(
            f"Only {steps} optimiser steps ({config.epochs} epochs of {n_train} documents in batches of "
            f"{config.batch_size}): the reconstruction will be poor. Suggested: {suggested.epochs} epochs "
            f"with batches of {suggested.batch_size}."
        )
    if config.k_aux is not None and config.k_aux > n_features:
        warnings.append(f"k_aux={config.k_aux} exceeds the {n_features} features; {n_features} will be used.")
    return warnings


def suggest_config(n_documents: int, dim: int, n_passages: int = 0) -> SAEConfig:
    """Defaults that suit the corpus: one feature per DOCUMENTS_PER_FEATURE training documents (a multiple of
    FEATURE_STEP, at least MIN_SUGGESTED_FEATURES), SUGGESTED_K active features per document (at most a quarter of the
    features), about TARGET_SAMPLES documents shown in at least MIN_STEPS steps and two epochs (more epochs on small
    corpora, fewer on large ones). A corpus of long documents, whose `n_passages` give at least PASSAGES_PER_DOCUMENT
    rows per document, trains on its passages too, with up to PASSAGE_FEATURE_GAIN times the features (at least
    MIN_FEATURES_WITH_PASSAGES where the rows allow); short texts train on the documents alone. `dim` does not change
    the suggestion: features are counted from documents, not dimensions."""
    default = SAEConfig()
    n_train, _ = default.split_sizes(n_documents)
    rows_per_document = max(1.0, n_passages / max(1, n_documents))
    passages = rows_per_document >= PASSAGES_PER_DOCUMENT
    features = _features_for(n_train * (min(rows_per_document, PASSAGE_FEATURE_GAIN) if passages else 1))
    smallest = MIN_SUGGESTED_FEATURES
    if passages:
        smallest = int(np.clip(_features_for(n_train * rows_per_document), smallest, MIN_FEATURES_WITH_PASSAGES))
    n_features = int(np.clip(features, smallest, MAX_SUGGESTED_FEATURES))
    batch_size = max(2, min(default.batch_size, n_train // 4))
    steps_per_epoch = max(1, n_train // batch_size)
    epochs = max(2, math.ceil(TARGET_SAMPLES / max(1, n_train)), math.ceil(MIN_STEPS / steps_per_epoch))
    epochs = min(epochs, MAX_SUGGESTED_EPOCHS)
    k = min(SUGGESTED_K, n_features // 4)
    return replace(default, n_features=n_features, k=k, batch_size=batch_size, epochs=epochs, passages=passages)


def _features_for(rows: float) -> int:
    return FEATURE_STEP * round(rows / DOCUMENTS_PER_FEATURE / FEATURE_STEP)


def training_bytes(config: SAEConfig, dim: int) -> int:
    """Memory the weights of an SAE on dim-dimensional vectors take while training (encoder and decoder; the
    trainings compared run one after the other)."""
    return 2 * config.n_features * dim * TRAINING_BYTES_PER_WEIGHT


def available_memory_bytes() -> int:
    """Memory this machine can still give (Linux: MemAvailable); total physical memory elsewhere."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _check_memory(config: SAEConfig, dim: int) -> None:
    needed, available = training_bytes(config, dim), available_memory_bytes()
    if needed > available:
        fitting = max(1, available // (2 * dim * TRAINING_BYTES_PER_WEIGHT))
        raise TrainingError(
            f"Training {config.n_features:,} features needs about {needed / 2**30:.1f} GB of memory; "
            f"{available / 2**30:.1f} GB are free. Use at most {fitting:,} features."
        )
