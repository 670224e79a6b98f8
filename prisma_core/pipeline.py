"""The stages chained over a workspace: dataset -> embeddings -> SAE run -> features -> labels -> families.

Each function takes configs and a progress callback, writes its artefacts to the store and returns what the caller
needs to show. The UI and the CLI call these and nothing deeper.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from prisma_core import analysis
from prisma_core.embed import EmbedConfig, embed_documents, model_key
from prisma_core.errors import TrainingError
from prisma_core.families import FamilyConfig, find_families
from prisma_core.ingest import (
    IngestConfig,
    IngestedDataset,
    Source,
    read_paths,
    read_sources,
)
from prisma_core.interpret.keywords import (
    KEYWORD_SOURCE,
    KeywordConfig,
    family_keyword_label,
    keyword_labels,
)
from prisma_core.interpret.label_scores import ScoreConfig, covering_keywords, label_embedding_scores
from prisma_core.progress import Progress, ProgressCallback, ignore_progress
from prisma_core.sae import (
    SAEConfig,
    TopKSAE,
    check_config,
    encode,
    load_sae,
    save_sae,
    train_sae,
)
from prisma_core.store import RunRecord, Workspace, now_iso

_VERSIONED_PACKAGES = ("torch", "sentence-transformers", "lancedb", "numpy")


@dataclass(frozen=True)
class EmbedSummary:
    embedding_key: str
    n_documents: int
    n_cached: int
    n_computed: int
    n_chunks: int
    n_tokens: int
    seconds: float


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    metrics: dict[str, Any]
    n_families: int
    warnings: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class LoadedRun:
    """Everything the exploration views need about one run, loaded once."""

    record: RunRecord
    codes: sp.csr_matrix  # [n_documents, n_features]
    directions: np.ndarray  # [n_features, d] unit-norm decoder directions
    features: pd.DataFrame  # stats + resolved label per feature
    families: list[dict[str, Any]]


# -- ingest ---------------------------------------------------------------------------------------------------


def ingest(
    workspace: Workspace,
    files: Sequence[str | Path] | Sequence[Source],
    name: str | None = None,
    config: IngestConfig = IngestConfig(),
) -> tuple[str, IngestedDataset]:
    """Read files (paths, or (name, bytes) uploads) into a new dataset. Nothing is stored unless all files read."""
    uploads = bool(files) and isinstance(files[0], tuple)
    dataset = read_sources(files, config) if uploads else read_paths(files, config)  # type: ignore[arg-type]
    default_name = Path(dataset.report.files[0]).stem if dataset.report.files else "dataset"
    dataset_id = workspace.add_dataset(
        name or default_name,
        dataset.documents,
        dataset.report.files,
        asdict(dataset.report),
    )
    return dataset_id, dataset


# -- embed ----------------------------------------------------------------------------------------------------


def embed_dataset(
    workspace: Workspace,
    dataset_id: str,
    config: EmbedConfig = EmbedConfig(),
    progress: ProgressCallback = ignore_progress,
) -> EmbedSummary:
    """Embed every document, computing only texts this embedding space has never seen (cache by text hash)."""
    started = time.perf_counter()
    key = model_key(config)
    docs = workspace.documents(dataset_id, ["position", "text", "text_hash"])
    if workspace.has_vectors(dataset_id, key):
        progress(Progress("embed", len(docs), len(docs), "all documents already embedded"))
        return EmbedSummary(key, len(docs), len(docs), 0, 0, 0, time.perf_counter() - started)
    cached = workspace.cached_vectors(key, docs["text_hash"].unique().tolist())
    missing = docs[~docs["text_hash"].isin(cached)].drop_duplicates("text_hash")
    n_cached = int(docs["text_hash"].isin(cached).sum())
    n_chunks = n_tokens = 0
    if len(missing):
        embedded = embed_documents(missing["text"].tolist(), config, progress)
        cached.update(zip(missing["text_hash"], embedded.vectors, strict=True))
        n_chunks, n_tokens = (
            int(embedded.chunking.chunks_per_doc.sum()),
            int(embedded.chunking.tokens_per_doc.sum()),
        )
    workspace.save_vectors(dataset_id, key, np.stack([cached[h] for h in docs["text_hash"]]))
    return EmbedSummary(
        embedding_key=key,
        n_documents=len(docs),
        n_cached=n_cached,
        n_computed=len(missing),
        n_chunks=n_chunks,
        n_tokens=n_tokens,
        seconds=time.perf_counter() - started,
    )


# -- train: SAE run with its features, keyword labels and families -------------------------------------------


def train_run(
    workspace: Workspace,
    dataset_id: str,
    sae_config: SAEConfig = SAEConfig(),
    embed_config: EmbedConfig = EmbedConfig(),
    family_config: FamilyConfig = FamilyConfig(),
    keyword_config: KeywordConfig = KeywordConfig(),
    progress: ProgressCallback = ignore_progress,
    should_stop: Callable[[], bool] | None = None,
) -> RunSummary:
    """Train an SAE on the dataset's embeddings and store the run with features, keyword labels and families.

    The run record is written last; on any failure the run's partial artefacts are removed and earlier runs and
    datasets are untouched. `should_stop()` turning true cancels (TrainingError) at the next training step, or
    before the record is written, leaving no run.
    """
    key = model_key(embed_config)
    vectors = workspace.vectors(dataset_id, key)
    warnings = check_config(sae_config, len(vectors), vectors.shape[1])
    run_id, run_dir = workspace.new_run_dir()
    seconds: dict[str, float] = {}
    try:
        started = time.perf_counter()
        result = train_sae(vectors, sae_config, progress, should_stop)
        save_sae(result.model, result.config, run_dir)
        seconds["train"] = time.perf_counter() - started

        started = time.perf_counter()
        codes = _store_codes(workspace, run_id, result.model, vectors)
        workspace.save_features(run_id, analysis.feature_stats(codes))
        texts = workspace.documents(dataset_id, ["position", "text"])["text"].tolist()
        progress(Progress("label", 0, 1, "keyword labels"))
        labels = keyword_labels(texts, codes, keyword_config)
        score_config = covering_keywords(ScoreConfig(), keyword_config.n_top_documents)
        labels["score_embedding"] = label_embedding_scores(
            labels["feature_id"].tolist(), labels["label"].tolist(), codes, vectors, embed_config, score_config
        ).scores
        workspace.add_interpretations(run_id, labels.to_dict(orient="records"))
        seconds["analyse"] = time.perf_counter() - started

        started = time.perf_counter()
        n_families = len(_store_families(workspace, run_id, codes, labels, family_config, progress))
        seconds["families"] = time.perf_counter() - started

        record = RunRecord(
            run_id=run_id,
            dataset_id=dataset_id,
            created_at=now_iso(),
            embedding_key=key,
            config={
                "sae": asdict(result.config),
                "embed": asdict(embed_config),
                "families": asdict(family_config),
                "keywords": asdict(keyword_config),
            },
            metrics=result.metrics | {"n_families": n_families},
            history=result.history,
            weights_dir=str(run_dir),
            versions=_versions(),
        )
        if should_stop is not None and should_stop():
            raise TrainingError("Training was cancelled after the SAE was trained; nothing was saved.")
        workspace.add_run(record)
    except BaseException:
        workspace.delete_run(run_id)
        raise
    return RunSummary(run_id, record.metrics, n_families, warnings, seconds)


def _store_codes(workspace: Workspace, run_id: str, model: TopKSAE, vectors: np.ndarray) -> sp.csr_matrix:
    values, indices = encode(model, vectors)
    codes = analysis.codes_matrix(values, indices, model.n_latents)
    coo = codes.tocoo()
    workspace.save_activations(run_id, coo.row, coo.col, coo.data)
    return codes


def _store_families(
    workspace: Workspace,
    run_id: str,
    codes: sp.csr_matrix,
    labels: pd.DataFrame,
    config: FamilyConfig,
    progress: ProgressCallback,
) -> list[dict[str, Any]]:
    label_of = dict(zip(labels["feature_id"], labels["label"], strict=True))
    rows = [
        {
            "family_id": family.family_id,
            "iteration": family.iteration,
            "parent": family.parent,
            "members": family.members,
            "edges": family.edges,
            "label": family_keyword_label(label_of[family.parent], [label_of[m] for m in family.members[1:]]),
            "label_source": KEYWORD_SOURCE,
        }
        for family in find_families(codes, config, progress)
    ]
    workspace.save_families(run_id, rows)
    return rows


def rebuild_families(
    workspace: Workspace,
    run_id: str,
    config: FamilyConfig,
    progress: ProgressCallback = ignore_progress,
) -> list[dict[str, Any]]:
    """Recompute a run's families with another tau or number of iterations (replaces the stored set)."""
    run = load_run(workspace, run_id)
    return _store_families(workspace, run_id, run.codes, run.features, config, progress)


def _versions() -> dict[str, str]:
    from prisma_core import __version__

    return {"prisma": __version__} | {name: metadata.version(name) for name in _VERSIONED_PACKAGES}


# -- reading a run back ----------------------------------------------------------------------------------------


def resolve_labels(interpretations: pd.DataFrame) -> pd.DataFrame:
    """The label shown for each feature: the one the analyst preferred, else the newest LLM label, else keywords."""
    ranked = interpretations.assign(
        rank_preferred=interpretations["preferred"].astype(bool),
        rank_llm=interpretations["source"] != KEYWORD_SOURCE,
    ).sort_values(["feature_id", "rank_preferred", "rank_llm", "created_at"])
    chosen = ranked.groupby("feature_id", as_index=False).tail(1)
    return chosen.rename(columns={"source": "label_source"})[
        [
            "feature_id",
            "label",
            "description",
            "label_source",
            "score_embedding",
            "score_detection",
            "interpretation_id",
        ]
    ]


def load_run(workspace: Workspace, run_id: str | None = None, dataset_id: str | None = None) -> LoadedRun:
    record = workspace.run(run_id) if run_id else workspace.latest_run(dataset_id)
    model, _ = load_sae(Path(record.weights_dir))
    n_docs = workspace.dataset(record.dataset_id).n_documents
    rows = workspace.activations(record.run_id)
    codes = analysis.codes_from_rows(
        rows["position"].to_numpy(),
        rows["feature_id"].to_numpy(),
        rows["value"].to_numpy(),
        n_docs,
        model.n_latents,
    )
    features = workspace.features(record.run_id).merge(
        resolve_labels(workspace.interpretations(record.run_id)),
        on="feature_id",
        how="left",
    )
    directions = model.decoder_directions().detach().cpu().numpy()
    return LoadedRun(record, codes, directions, features, workspace.families(record.run_id))


def family_membership(families: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """feature_id -> (family_id, parent) for the first family each feature appears in; roots have no parent."""
    rows: dict[int, tuple[int, int | None]] = {}
    for family in families:
        parent_of = {child: parent for parent, child, _ in family["edges"]}
        for member in family["members"]:
            rows.setdefault(member, (family["family_id"], parent_of.get(member)))
    return pd.DataFrame(
        [(f, fam, parent) for f, (fam, parent) in rows.items()],
        columns=["feature_id", "family_id", "parent"],
    ).astype({"feature_id": "int32", "family_id": "Int32", "parent": "Int32"})


# -- export ----------------------------------------------------------------------------------------------------


def export_run(workspace: Workspace, run_id: str | None, out_dir: str | Path) -> list[Path]:
    """Write features.parquet, activations.parquet, documents.parquet, families.json, sae.safetensors, config.json."""
    run = load_run(workspace, run_id)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    docs = workspace.documents(run.record.dataset_id, ["position", "doc_id", "title", "metadata"])
    features = run.features.merge(family_membership(run.families), on="feature_id", how="left")
    feature_columns = [
        "feature_id",
        "density",
        "density_fraction",
        "mean_activation",
        "max_activation",
        "label",
        "description",
        "label_source",
        "score_embedding",
        "score_detection",
        "family_id",
        "parent",
    ]
    features[feature_columns].to_parquet(out / "features.parquet", index=False)
    coo = run.codes.tocoo()
    pd.DataFrame(
        {
            "doc_id": docs["doc_id"].to_numpy()[coo.row],
            "feature_id": coo.col.astype(np.int32),
            "value": coo.data,
        }
    ).to_parquet(out / "activations.parquet", index=False)
    metadata_frame = workspace.metadata(run.record.dataset_id)
    pd.concat([docs[["doc_id", "title"]], metadata_frame], axis=1).to_parquet(out / "documents.parquet", index=False)
    (out / "families.json").write_text(json.dumps(_families_for_export(run.families), indent=2))
    weights = Path(run.record.weights_dir)
    (out / "sae.safetensors").write_bytes((weights / "sae.safetensors").read_bytes())
    run_config = {
        "run_id": run.record.run_id,
        "dataset_id": run.record.dataset_id,
        "embedding_key": run.record.embedding_key,
        "created_at": run.record.created_at,
        "config": run.record.config,
        "metrics": run.record.metrics,
        "versions": run.record.versions,
    }
    (out / "config.json").write_text(json.dumps(run_config, indent=2))
    return [
        out / name
        for name in (
            "features.parquet",
            "activations.parquet",
            "documents.parquet",
            "families.json",
            "sae.safetensors",
            "config.json",
        )
    ]


def _families_for_export(families: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "family_id": int(f["family_id"]),
            "iteration": int(f["iteration"]),
            "label": f["label"],
            "label_source": f["label_source"],
            "parent": int(f["parent"]),
            "members": f["members"],
            "edges": [{"parent": p, "child": c, "weight": w} for p, c, w in f["edges"]],
        }
        for f in families
    ]
