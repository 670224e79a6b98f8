"""Settings forms generated from the stage configs: each field's widget, label, help, bounds and choices come
from its `setting` metadata (prisma_core.config_docs), so a form never restates a setting's range or wording."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import streamlit as st

from prisma_core.pipeline.settings import field_help, field_kind, field_metadata, form_choices

COLUMNS = 3


def config_inputs(config: Any, names: Sequence[str], key_prefix: str = "", columns: int = COLUMNS) -> dict[str, Any]:
    """Draws a widget for each named field of `config` (pre-filled with its values), `columns` to a row, keyed
    `key_prefix + field name`; returns field name -> the value entered."""
    values = {}
    for start in range(0, len(names), columns):
        row = st.columns(columns)
        for column, name in zip(row, names[start : start + columns], strict=False):
            with column:
                values[name] = config_input(config, name, key_prefix + name)
    return values


def config_input(config: Any, name: str, key: str) -> Any:
    """One field's widget: a select box for choices, a checkbox for a yes/no, a text box for free text, else a
    number box (or a slider) within the field's bounds. An optional number may be left empty."""
    config_type = type(config)
    metadata = field_metadata(config_type, name)
    label, help_text, value = metadata["label"], field_help(config_type)[name], getattr(config, name)
    kind, choices = field_kind(config_type, name), form_choices(config_type, name)
    if choices:
        return st.selectbox(label, choices, index=list(choices).index(value), help=help_text, key=key)
    if kind is bool:
        return st.checkbox(label, value=value, help=help_text, key=key)
    if kind is str:
        return st.text_input(label, value=value, help=help_text, key=key)
    return _number_input(kind, metadata, label, help_text, value, key)


def _number_input(kind: type, metadata: Mapping[str, Any], label: str, help_text: str, value: Any, key: str) -> Any:
    low, high = (None if bound is None else kind(bound) for bound in (metadata["minimum"], metadata["maximum"]))
    value = None if value is None else kind(value)
    step = None if metadata["step"] is None else kind(metadata["step"])
    if metadata["slider"]:
        return st.slider(label, low, high, value, step, help=help_text, key=key)
    return st.number_input(
        label,
        min_value=low,
        max_value=high,
        value=value,
        step=step,
        format=metadata["number_format"],
        placeholder=metadata["empty"] or None,
        help=help_text,
        key=key,
    )
