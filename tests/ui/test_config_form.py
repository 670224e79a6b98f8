"""The settings forms are generated from the configs: every widget carries its field's bounds, choices, label and
analyst help, and a value the widget allows is one the config accepts."""

import pytest
from streamlit.testing.v1 import AppTest

from prisma_core.concepts.families import FamilyConfig
from prisma_core.config_docs import field_help, field_metadata, form_choices
from prisma_core.embed import EmbedConfig
from prisma_core.errors import SettingsError
from prisma_core.sae import SAEConfig
from prisma_core.sae.config import MAX_FEATURES, MAX_TRAININGS

SHOWN = {
    SAEConfig: (
        *("n_features", "k", "n_trainings", "epochs", "batch_size", "lr", "seed"),
        *("k_aux", "aux_alpha", "dead_after", "holdout_fraction", "grad_clip", "device"),
    ),
    FamilyConfig: ("tau", "iterations", "min_family_size"),
    EmbedConfig: ("model", "batch_size", "normalize", "precision", "device", "backend", "ray_address"),
}


def form_script() -> None:
    from test_config_form import SHOWN

    from prisma_core.concepts.families import FamilyConfig
    from prisma_core.embed import EmbedConfig
    from prisma_core.sae import SAEConfig
    from ui.config_form import config_inputs

    for config_type, prefix in ((SAEConfig, "sae_"), (FamilyConfig, "family_"), (EmbedConfig, "embed_")):
        config_inputs(config_type(), SHOWN[config_type], prefix)


@pytest.fixture(scope="module")
def form() -> AppTest:
    at = AppTest.from_function(form_script, default_timeout=60).run()
    assert not at.exception
    return at


def widget(at: AppTest, key: str):
    widgets = [*at.number_input, *at.slider, *at.selectbox, *at.checkbox, *at.text_input]
    return next(element for element in widgets if element.key == key)


@pytest.mark.parametrize(
    ("config_type", "prefix"), [(SAEConfig, "sae_"), (FamilyConfig, "family_"), (EmbedConfig, "embed_")]
)
def test_every_widget_carries_its_fields_label_help_and_default(form, config_type, prefix):
    defaults, help_texts = config_type(), field_help(config_type)
    for name in SHOWN[config_type]:
        element = widget(form, prefix + name)
        assert element.label == field_metadata(config_type, name)["label"]
        assert element.help == help_texts[name]
        assert element.value == getattr(defaults, name)


def test_number_widgets_carry_the_configs_bounds(form):
    for config_type, prefix in ((SAEConfig, "sae_"), (FamilyConfig, "family_")):
        for name in SHOWN[config_type]:
            metadata = field_metadata(config_type, name)
            if metadata["minimum"] is not None:
                assert widget(form, prefix + name).min == metadata["minimum"]
            if metadata["maximum"] is not None:
                assert widget(form, prefix + name).max == metadata["maximum"]
    assert widget(form, "sae_n_features").max == MAX_FEATURES
    assert (widget(form, "sae_n_trainings").min, widget(form, "sae_n_trainings").max) == (1, MAX_TRAININGS)
    assert (widget(form, "sae_holdout_fraction").min, widget(form, "sae_holdout_fraction").max) == (0.0, 0.89)
    assert (widget(form, "family_tau").min, widget(form, "family_tau").max) == (0.0, 1.0)  # a slider


def test_choice_widgets_offer_the_literal_values_and_the_devices(form):
    assert widget(form, "embed_precision").options == ["auto", "fp32", "bf16", "int8"]
    assert widget(form, "embed_backend").options == ["auto", "torch", "openvino", "ollama"]  # embed/backends.py
    assert widget(form, "embed_device").options == widget(form, "sae_device").options == ["auto", "cpu", "cuda", "mps"]
    assert tuple(widget(form, "embed_precision").options) == form_choices(EmbedConfig, "precision")


def test_optional_numbers_start_empty_and_say_what_empty_means(form):
    assert widget(form, "sae_lr").value is None and widget(form, "sae_k_aux").value is None
    assert widget(form, "sae_lr").proto.placeholder == "auto"
    assert widget(form, "sae_dead_after").proto.placeholder == "one epoch"


def test_a_count_of_documents_in_the_thousands_steps_by_a_thousand(form):
    assert widget(form, "sae_dead_after").step == 1_000
    assert widget(form, "sae_k_aux").step == 1


@pytest.mark.parametrize("config_type", [SAEConfig, FamilyConfig, EmbedConfig])
def test_the_widgets_bounds_are_exactly_what_the_config_accepts(config_type):
    for name in SHOWN[config_type]:
        metadata = field_metadata(config_type, name)
        for bound, outside in ((metadata["minimum"], -1), (metadata["maximum"], 1)):
            if bound is None:
                continue
            config_type(**{name: bound})  # the bound itself is accepted
            step = 1 if isinstance(bound, int) else 0.01 * max(abs(bound), 1e-6)
            with pytest.raises(SettingsError, match=f"{name} must be"):
                config_type(**{name: bound + outside * step})


def test_every_invalid_setting_raises_the_one_error_type_naming_each_problem():
    with pytest.raises(SettingsError) as refused:
        SAEConfig(k=0, device="gpu", holdout_fraction=1.0, lr=2.0)
    assert str(refused.value) == (
        "Invalid SAE settings: k must be a whole number between 1 and 4096, got 0; lr must be between 1e-06 and 0.5, "
        "got 2.0; holdout_fraction must be between 0.0 and 0.89, got 1.0; "
        'device must be "auto", "cpu", "cuda", "cuda:N" or "mps", got "gpu".'
    )
    with pytest.raises(SettingsError, match="precision must be auto, fp32, bf16 or int8, got 'fp8'"):
        EmbedConfig(precision="fp8")
    with pytest.raises(SettingsError, match=r"iterations must be a whole number, got 1\.5"):
        FamilyConfig(iterations=1.5)


def test_the_help_of_the_form_settings_is_written_for_an_analyst():
    for config_type, shown in SHOWN.items():
        help_texts = field_help(config_type)
        assert set(shown) <= set(help_texts)
        for text in help_texts.values():  # no formulas or code names from the developer docstrings
            assert text and not any(jargon in text for jargon in ("n_latents", "None ->", "sqrt", "cooccurrence", "`"))
