"""The read model's shape: `LoadedRun`, a stored run loaded for reading (`runs.load_run` builds it), and `Edited`, how
the analyst's edits were applied to it. Below both `runs` and `edits`, which name it."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import scipy.sparse as sp

from prisma_core.concepts.subthemes import SubThemes
from prisma_core.concepts.themes import Themes
from prisma_core.run_shape.run_settings import RunSettings
from prisma_core.store import EditRecord, NamedFamily, RunRecord
from prisma_core.store.location import Location


@dataclass(frozen=True)
class Edited:
    """How a run's edits were applied: those shown and those whose concept is gone or changed too much."""

    applied: tuple[EditRecord, ...] = ()
    not_applied: tuple[EditRecord, ...] = ()


@dataclass(frozen=True)
class LoadedRun:
    """Everything the exploration views need about one run, loaded once."""

    record: RunRecord
    settings: RunSettings  # the record's settings, typed
    weights: Location  # the run's folder (sae.safetensors, config.json), reached with the workspace's settings
    codes: sp.csr_matrix  # [n_documents, n_features]
    directions: np.ndarray  # [n_features, d] unit-norm decoder directions
    features: pd.DataFrame  # stats, n_strong (documents where it is strong), resolved label, theme_id per feature
    families: list[NamedFamily]
    themes: Themes | None  # None for runs made before themes existed
    theme_info: pd.DataFrame  # theme_id, label, description, label_source, n_documents, features, pinned
    subthemes: SubThemes | None  # None for runs made before sub-themes existed
    subtheme_info: pd.DataFrame  # subtheme_id, theme_id, label, description, label_source, n_documents, features
    # the analyst's edits shown, and those whose concept changed too much to apply
    edited: Edited = field(default_factory=Edited)
