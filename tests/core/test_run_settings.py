"""A run's recorded settings read into the stage configs: records of older versions read with defaults, a malformed
record raises SettingsError naming the run."""

from dataclasses import asdict
from typing import Any

import pytest

from prisma_core.concepts.families import FamilyConfig
from prisma_core.concepts.themes import ThemeConfig
from prisma_core.embed import EmbedConfig
from prisma_core.errors import SettingsError
from prisma_core.interpret.keywords import KeywordConfig
from prisma_core.reading.runs import trainings_compared
from prisma_core.run_shape.run_settings import run_settings
from prisma_core.sae import SAEConfig
from prisma_core.store import RunRecord


def record(config: dict[str, Any]) -> RunRecord:
    return RunRecord("run-old", "ds-x", "2026-11-22T10:00:00+00:00", "all-MiniLM-L6-v2", config, {}, [], "", {})


def test_a_current_record_reads_back_the_configs_it_was_written_from():
    configs = {
        "sae": SAEConfig(n_features=96, k=8, n_trainings=5, seed=7),
        "embed": EmbedConfig(batch_size=8, normalize=True),
        "keywords": KeywordConfig(n_top_documents=12),
        "families": FamilyConfig(tau=0.25, iterations=2),
        "themes": ThemeConfig(n_themes=6, member_share=0.4, fit_share=0.6),
    }
    settings = run_settings(record({stage: asdict(config) for stage, config in configs.items()}))
    assert asdict(settings) == {stage: asdict(config) for stage, config in configs.items()}
    assert trainings_compared(settings) == 5


def test_a_record_of_the_first_version_reads_with_the_defaults_of_what_it_lacks():
    """The first runs recorded an expansion factor instead of a number of features, and no themes."""
    old = {
        "sae": {"expansion_factor": 8, "k": 32, "epochs": 20, "lr": None, "seed": 3},
        "embed": {"model": "all-MiniLM-L6-v2", "batch_size": 64, "normalize": False, "device": "auto"},
        "families": {"tau": 0.2, "iterations": 3, "min_family_size": 2},
        "keywords": {"max_vocabulary": 30_000, "n_description_terms": 10},
    }
    settings = run_settings(record(old), dim=384)
    assert settings.themes == ThemeConfig()
    assert (settings.sae.n_features, settings.sae.k, settings.sae.n_trainings) == (8 * 384, 32, 1)
    assert (settings.sae.epochs, settings.sae.seed, settings.sae.init) == (20, 3, "random")
    assert settings.embed.batch_size == 64 and settings.embed.precision == EmbedConfig().precision
    assert settings.families == FamilyConfig(tau=0.2, min_family_size=2)
    assert settings.keywords == KeywordConfig(max_vocabulary=30_000, n_description_terms=10)
    without_size = run_settings(record(old))
    assert without_size.sae is None and without_size.families == settings.families
    assert trainings_compared(without_size) == 1


def test_a_record_without_any_section_reads_as_the_defaults():
    settings = run_settings(record({}))
    assert settings.sae is None and trainings_compared(settings) == 1
    assert (settings.embed, settings.keywords, settings.families, settings.themes) == (
        EmbedConfig(),
        KeywordConfig(),
        FamilyConfig(),
        ThemeConfig(),
    )


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"themes": {"member_share": 2.0}}, "member_share must be above 0 and at most 1, got 2.0"),
        ({"families": {"tau": "tight"}}, "tau must be a finite number, got 'tight'"),
        ({"sae": {"n_features": 64, "k": 0}}, "k must be a whole number between 1 and 4096, got 0"),
        ({"keywords": {"n_top": 5}}, "Unknown keyword settings: n_top"),
        ({"embed": ["all-MiniLM-L6-v2"]}, "the embed settings are ['all-MiniLM-L6-v2'], not settings by name"),
        ({"sae": {"n_features": 64, "expansion": 8}}, "Unknown SAE settings: expansion"),
    ],
)
def test_a_malformed_record_raises_a_settings_error_naming_the_run_and_the_setting(config, named):
    with pytest.raises(SettingsError) as raised:
        run_settings(record(config), dim=384)
    assert "run run-old" in str(raised.value) and named in str(raised.value)


def test_background_features_keep_their_own_names_apart():
    """Issue 44: a run of k = 32 has several features active on most documents; two of them at 52% were both
    "background: in 52% of documents". Their words keep them apart; a name the analyst gave stays."""
    import pandas as pd

    from prisma_core.reading.runs import background_named
    from prisma_core.store.schemas import KEYWORD_SOURCE, MANUAL_SOURCE

    features = pd.DataFrame(
        {
            "density_fraction": [0.52, 0.52, 0.7, 0.1],
            "label": ["patient · history", "medications · allergies", "Vital signs", "knee · arthroscopy"],
            "label_source": [KEYWORD_SOURCE, KEYWORD_SOURCE, MANUAL_SOURCE, KEYWORD_SOURCE],
        }
    )
    named = background_named(features)
    assert named["label"].tolist() == [
        "background: in 52% of documents (patient · history)",
        "background: in 52% of documents (medications · allergies)",
        "Vital signs",
        "knee · arthroscopy",
    ]
    assert named["background"].tolist() == [True, True, True, False]
