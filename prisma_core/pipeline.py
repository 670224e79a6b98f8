"""The stages chained over a workspace: dataset -> embeddings -> SAE run -> features -> labels -> families.

Each function takes configs and a progress callback, writes its artefacts to the store and returns what the caller
needs to show. The UI and the CLI call these and nothing deeper.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from prisma_core import analysis
from prisma_core.embed import EmbedConfig, embed_documents, embed_texts, model_key
from prisma_core.errors import NotFoundError, StoreError, TrainingError
from prisma_core.families import FamilyConfig, find_families
from prisma_core.ingest import (
    IngestConfig,
    IngestedDataset,
    Source,
    read_paths,
    read_sources,
)
from prisma_core.interpret.keywords import KEYWORD_SOURCE, KeywordConfig, keyword_labels, top_document_members
from prisma_core.interpret.label_scores import LABEL_BATCH_SIZE, ScoreConfig, covering_keywords, label_embedding_scores
from prisma_core.progress import Progress, ProgressCallback, ignore_progress
from prisma_core.sae import (
    SAEConfig,
    TopKSAE,
    check_config,
    encode,
    load_sae,
    resolve_device,
    save_sae,
    suggest_config,
    train_sae,
)
from prisma_core.store import RunRecord, Workspace, now_iso
from prisma_core.themes import ThemeConfig, Themes, build_themes, themes_from_evidence

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
    n_themes: int
    warnings: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class LoadedRun:
    """Everything the exploration views need about one run, loaded once."""

    record: RunRecord
    codes: sp.csr_matrix  # [n_documents, n_features]
    directions: np.ndarray  # [n_features, d] unit-norm decoder directions
    features: pd.DataFrame  # stats, n_strong (documents where it is strong), resolved label, theme_id per feature
    families: list[dict[str, Any]]
    themes: Themes | None  # None for runs made before themes existed
    theme_info: pd.DataFrame  # theme_id, label, description, label_source, n_documents, features


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


# -- train: SAE run with its features, themes, keyword labels and families ---------------------------------


def suggested_sae_config(workspace: Workspace, dataset_id: str, embed_config: EmbedConfig = EmbedConfig()) -> SAEConfig:
    """SAE settings that suit the embedded dataset's size (the defaults of every entry point; explicit settings
    win)."""
    return suggest_config(*workspace.vectors(dataset_id, model_key(embed_config)).shape)


def train_run(
    workspace: Workspace,
    dataset_id: str,
    sae_config: SAEConfig | None = None,
    embed_config: EmbedConfig = EmbedConfig(),
    family_config: FamilyConfig = FamilyConfig(),
    keyword_config: KeywordConfig = KeywordConfig(),
    theme_config: ThemeConfig = ThemeConfig(),
    progress: ProgressCallback = ignore_progress,
    should_stop: Callable[[], bool] | None = None,
) -> RunSummary:
    """Train an SAE on the dataset's embeddings and store the run with features, themes, keyword labels and
    families. Without an sae_config, the settings suggested for the dataset's size are used.

    The run record is written last; on any failure the run's partial artefacts are removed and earlier runs and
    datasets are untouched. `should_stop()` turning true cancels (TrainingError) at the next training step, or
    before the record is written, leaving no run.
    """
    key = model_key(embed_config)
    vectors = workspace.vectors(dataset_id, key)
    sae_config = sae_config or suggest_config(len(vectors), vectors.shape[1])
    warnings = check_config(sae_config, len(vectors), vectors.shape[1])
    resolve_device(sae_config.device)  # a missing GPU is reported before anything is written
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
        texts = _texts_of_dataset_still_there(workspace, dataset_id)
        labeller = _KeywordLabeller(texts, vectors, embed_config, keyword_config)
        progress(Progress("label", 0, 1, "keyword labels"))
        labels = _feature_labels(labeller, codes, vectors, embed_config, keyword_config)
        workspace.add_interpretations(run_id, labels.to_dict(orient="records"))
        seconds["analyse"] = time.perf_counter() - started

        started = time.perf_counter()
        themes = _store_themes(workspace, run_id, codes, vectors, labeller, theme_config, progress)
        seconds["themes"] = time.perf_counter() - started

        started = time.perf_counter()
        n_families = len(_store_families(workspace, run_id, codes, labeller, family_config, progress))
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
                "themes": asdict(theme_config),
            },
            metrics=result.metrics | {"n_families": n_families, "n_themes": themes.n_themes},
            history=result.history,
            weights_dir=str(run_dir),
            versions=_versions(),
        )
        if should_stop is not None and should_stop():
            raise TrainingError("Training was cancelled after the SAE was trained; nothing was saved.")
        _texts_of_dataset_still_there(workspace, dataset_id)
        workspace.add_run(record)
    except BaseException:
        with contextlib.suppress(StoreError):  # the error that stopped the run is the one to report
            workspace.delete_run(run_id)
        raise
    return RunSummary(run_id, record.metrics, n_families, themes.n_themes, warnings, seconds)


class _KeywordLabeller:
    """Keyword labels for any group of documents, on one corpus (the vocabulary is counted once)."""

    def __init__(self, texts: list[str], vectors: np.ndarray, embed_config: EmbedConfig, config: KeywordConfig) -> None:
        self.texts, self.vectors, self.config = texts, vectors, config
        label_config = replace(embed_config, batch_size=max(embed_config.batch_size, LABEL_BATCH_SIZE))
        self.embed = lambda terms: embed_texts(terms, label_config)

    def __call__(self, members: sp.spmatrix) -> pd.DataFrame:
        """members: [n_units, n_documents] 0/1 -> unit, label, description, source."""
        return keyword_labels(self.texts, members, self.vectors, self.embed, self.config)


def _feature_labels(
    labeller: _KeywordLabeller,
    codes: sp.csr_matrix,
    vectors: np.ndarray,
    embed_config: EmbedConfig,
    keyword_config: KeywordConfig,
) -> pd.DataFrame:
    labels = labeller(top_document_members(codes, keyword_config.n_top_documents)).rename(
        columns={"unit": "feature_id"}
    )
    score_config = covering_keywords(ScoreConfig(), keyword_config.n_top_documents)
    labels["score_embedding"] = label_embedding_scores(
        labels["feature_id"].tolist(), labels["label"].tolist(), codes, vectors, embed_config, score_config
    ).scores
    return labels


def _texts_of_dataset_still_there(workspace: Workspace, dataset_id: str) -> list[str]:
    """The dataset's texts; NotFoundError when it was deleted (say, from another session) while its SAE trained."""
    try:
        workspace.dataset(dataset_id)
    except NotFoundError:
        raise NotFoundError("The dataset was deleted while its SAE was training; nothing was saved.") from None
    return workspace.documents(dataset_id, ["position", "text"])["text"].tolist()


def _store_codes(workspace: Workspace, run_id: str, model: TopKSAE, vectors: np.ndarray) -> sp.csr_matrix:
    values, indices = encode(model, vectors)
    codes = analysis.codes_matrix(values, indices, model.n_latents)
    coo = codes.tocoo()
    workspace.save_activations(run_id, coo.row, coo.col, coo.data)
    return codes


def _store_themes(
    workspace: Workspace,
    run_id: str,
    codes: sp.csr_matrix,
    vectors: np.ndarray,
    labeller: _KeywordLabeller,
    config: ThemeConfig,
    progress: ProgressCallback,
) -> Themes:
    themes = build_themes(codes, vectors, config, progress)
    members = themes.members()
    labels = labeller(members.T.tocsr())
    feature_theme = themes.feature_theme()
    rows = [
        {
            "theme_id": theme,
            "label": labels.loc[theme, "label"],
            "description": labels.loc[theme, "description"],
            "label_source": KEYWORD_SOURCE,
            "n_documents": int(members[:, theme].sum()),
            "features": _strongest_first(np.flatnonzero(feature_theme == theme), themes.evidence[:, theme]),
            "evidence": themes.evidence[:, theme],
        }
        for theme in range(themes.n_themes)
    ]
    workspace.save_themes(run_id, rows)
    return themes


def _strongest_first(features: np.ndarray, evidence: np.ndarray) -> list[int]:
    return [int(f) for f in features[np.argsort(-evidence[features], kind="stable")]]


def _store_families(
    workspace: Workspace,
    run_id: str,
    codes: sp.csr_matrix,
    labeller: _KeywordLabeller,
    config: FamilyConfig,
    progress: ProgressCallback,
) -> list[dict[str, Any]]:
    families = find_families(codes, config, progress)
    family_codes = codes @ family_matrix([f.members for f in families], codes.shape[1])
    labels = labeller(top_document_members(family_codes, labeller.config.n_top_documents))
    rows = [
        {
            "family_id": family.family_id,
            "iteration": family.iteration,
            "parent": family.parent,
            "members": family.members,
            "edges": family.edges,
            "label": labels.loc[i, "label"],
            "label_source": KEYWORD_SOURCE,
        }
        for i, family in enumerate(families)
    ]
    workspace.save_families(run_id, rows)
    return rows


def family_matrix(members: Sequence[Sequence[int]], n_features: int) -> sp.csr_matrix:
    """[n_features, n_families] 0/1: which features each family holds."""
    rows = np.concatenate([np.asarray(m, np.int64) for m in members]) if members else np.empty(0, np.int64)
    cols = np.repeat(np.arange(len(members)), [len(m) for m in members])
    return sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(n_features, len(members)))


def rebuild_families(
    workspace: Workspace,
    run_id: str,
    config: FamilyConfig,
    progress: ProgressCallback = ignore_progress,
) -> list[dict[str, Any]]:
    """Recompute a run's families with another tau or number of iterations (replaces the stored set)."""
    run = load_run(workspace, run_id)
    return _store_families(workspace, run_id, run.codes, _run_labeller(workspace, run), config, progress)


def rebuild_themes(
    workspace: Workspace,
    run_id: str,
    config: ThemeConfig,
    progress: ProgressCallback = ignore_progress,
) -> Themes:
    """Regroup a run's features into another number of themes (no retraining; replaces the stored themes)."""
    run = load_run(workspace, run_id)
    vectors = workspace.vectors(run.record.dataset_id, run.record.embedding_key)
    return _store_themes(workspace, run_id, run.codes, vectors, _run_labeller(workspace, run), config, progress)


def _run_labeller(workspace: Workspace, run: LoadedRun) -> _KeywordLabeller:
    texts = workspace.documents(run.record.dataset_id, ["position", "text"])["text"].tolist()
    vectors = workspace.vectors(run.record.dataset_id, run.record.embedding_key)
    keyword_config = KeywordConfig(**run.record.config.get("keywords", {}))
    return _KeywordLabeller(texts, vectors, EmbedConfig(**run.record.config["embed"]), keyword_config)


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
    features["n_strong"] = analysis.strong_density(codes)[features["feature_id"].to_numpy()]
    directions = model.decoder_directions().detach().cpu().numpy()
    theme_rows = workspace.themes(record.run_id)
    themes = None
    if theme_rows:
        member_share = record.config.get("themes", {}).get("member_share", ThemeConfig().member_share)
        themes = themes_from_evidence(codes, np.stack([t["evidence"] for t in theme_rows], axis=1), member_share)
        features["theme_id"] = themes.feature_theme()[features["feature_id"].to_numpy()]
    else:
        features["theme_id"] = -1
    theme_info = pd.DataFrame(
        [{k: v for k, v in row.items() if k != "evidence"} for row in theme_rows],
        columns=["theme_id", "label", "description", "label_source", "n_documents", "features"],
    )
    return LoadedRun(record, codes, directions, features, workspace.families(record.run_id), themes, theme_info)


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


def document_themes(run: LoadedRun) -> pd.DataFrame:
    """Per document (in stored order): theme_id (its strongest theme, -1 if none) and themes (the ids of every
    theme it belongs to, most probable first)."""
    n_docs = run.codes.shape[0]
    if run.themes is None:
        return pd.DataFrame({"theme_id": np.full(n_docs, -1, np.int32), "themes": [[] for _ in range(n_docs)]})
    members = run.themes.members()
    probabilities = run.themes.probabilities
    themes = [
        sorted(members.indices[members.indptr[d] : members.indptr[d + 1]].tolist(), key=lambda t: -probabilities[d, t])
        for d in range(n_docs)
    ]
    return pd.DataFrame({"theme_id": run.themes.strongest(), "themes": themes})


# -- export ----------------------------------------------------------------------------------------------------


EXPORT_FILES = (
    "features.parquet",
    "activations.parquet",
    "documents.parquet",
    "families.json",
    "themes.json",
    "sae.safetensors",
    "config.json",
)
EXPORT_MARKER = ".prisma-export"
APP_EXPORTS = "exports"
"""The workspace folder the app exports into (for downloads): the one place inside a workspace an export may go."""
"""Written into every export folder: the files named in EXPORT_FILES there were written by an export."""


def export_run(workspace: Workspace, run_id: str | None, out_dir: str | Path) -> list[Path]:
    """Write features.parquet, activations.parquet, documents.parquet, families.json, themes.json, sae.safetensors,
    config.json.

    Everything is written to a temporary folder next to `out_dir` first and moved in once complete, so a failed
    export leaves nothing half-written. Refuses a folder inside the workspace (except the app's own `exports/`)
    and never overwrites a file an earlier export did not write.
    """
    out = export_target(workspace, Path(out_dir))
    run = load_run(workspace, run_id)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".prisma-export-", dir=out.parent))
    try:
        _write_export(workspace, run, staging)
        out.mkdir(exist_ok=True)
        (out / EXPORT_MARKER).touch()
        for name in EXPORT_FILES:
            (staging / name).replace(out / name)
    except OSError as error:
        raise StoreError(f"Could not write the export to {out}: {error.strerror or error}.") from error
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [out / name for name in EXPORT_FILES]


def export_target(workspace: Workspace, out: Path) -> Path:
    """The resolved export folder, once it is known to be safe to write into."""
    out = out.expanduser().resolve()
    if out.is_relative_to(workspace.path) and not out.is_relative_to(workspace.path / APP_EXPORTS):
        raise StoreError(f"{out} is inside the workspace {workspace.path}; export to a folder outside it.")
    if out.exists() and not out.is_dir():
        raise StoreError(f"{out} is a file; export to a folder.")
    if out.is_dir() and not (out / EXPORT_MARKER).exists():
        taken = [name for name in EXPORT_FILES if (out / name).exists()]
        if taken:
            raise StoreError(
                f"{out} already holds {', '.join(taken)}, not written by a Prisma export; "
                "export to an empty or new folder."
            )
    return out


def _write_export(workspace: Workspace, run: LoadedRun, out: Path) -> None:
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
        "theme_id",
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
    documents = pd.concat([docs[["doc_id", "title"]], document_themes(run), metadata_frame], axis=1)
    documents.to_parquet(out / "documents.parquet", index=False)
    (out / "families.json").write_text(json.dumps(_families_for_export(run.families), indent=2))
    (out / "themes.json").write_text(run.theme_info.to_json(orient="records", indent=2))
    weights = Path(run.record.weights_dir)
    shutil.copyfile(weights / "sae.safetensors", out / "sae.safetensors")
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
