"""Every stage setting described once, on its config dataclass: each field is declared with `setting`, which holds
in the field's metadata its reference text (`doc`, the command line's `--help`) and, for the settings the app's
forms show, the analyst's label and help, bounds and choices. The forms, the `--help` and the configs' own range
checks all read them from here, so a setting's explanation and range never drift apart.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Self

from prisma_core.errors import SettingsError


def field_docs(config_type: type) -> dict[str, str]:
    """Field name -> the reference text of each field (its `setting`'s `doc`; "" for a field declared without)."""
    if not dataclasses.is_dataclass(config_type):
        raise TypeError(f"{config_type!r} is not a dataclass")
    return {field.name: field.metadata.get("doc", "") for field in dataclasses.fields(config_type)}


DEVICE_CHOICES = ("auto", "cpu", "cuda", "mps")
"""The devices a form offers (the configs also accept "cuda:N")."""


def setting(
    default: Any = dataclasses.MISSING,
    *,
    default_factory: Callable[[], Any] | Any = dataclasses.MISSING,
    doc: str = "",
    label: str = "",
    help: str = "",
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
    choices: Sequence[str] = (),
    empty: str = "",
    step: float | None = None,
    number_format: str | None = None,
    slider: bool = False,
    unprefixed_flag: bool = False,
    secret: bool = False,
) -> Any:
    """A config field with its reference text, its bounds and, for a setting a form shows (one with a label), what
    the form needs to show it.

    doc is the precise reference (the command line's help); label and help are written for an analyst (help
    defaults to doc); minimum and maximum are inclusive
    bounds and `above` an exclusive lower bound, all checked by `range_problems`; choices are the values a form
    offers (a `Literal` field offers its own); empty says in words what leaving an optional field empty means
    (e.g. "auto"). default_factory instead of default: a default read when a config is made (e.g. from the
    environment). unprefixed_flag: the command line flag keeps the field's own name where the config's other flags
    take a prefix (`run`'s --embed-batch-size, but --ray-address). secret: a credential, never shown in the config's
    repr, compared or made a flag (a key on a command line ends up in shell history)."""
    metadata = {
        "doc": " ".join(doc.split()),
        "label": label,
        "help": help,
        "minimum": minimum,
        "above": above,
        "maximum": maximum,
        "choices": tuple(choices),
        "empty": empty,
        "step": step,
        "number_format": number_format,
        "slider": slider,
        "unprefixed_flag": unprefixed_flag,
        "cli": not secret,
    }
    return dataclasses.field(
        default=default, default_factory=default_factory, repr=not secret, compare=not secret, metadata=metadata
    )


def field_help(config_type: type) -> dict[str, str]:
    """Field name -> the analyst's help text of each form setting (a field declared with a `setting` label; its
    `doc` if no help is given)."""
    docs = field_docs(config_type)
    return {
        field.name: field.metadata["help"] or docs[field.name]
        for field in dataclasses.fields(config_type)
        if field.metadata.get("label")
    }


@functools.cache
def _type_hints(config_type: type) -> dict[str, Any]:
    """A config's field types, evaluated once: every config made checks its values against them."""
    return typing.get_type_hints(config_type)


def literal_values(config_type: type, name: str) -> tuple[Any, ...]:
    """The values of a `Literal` field (the only ones it accepts); () for any other field."""
    hint = _without_none(_type_hints(config_type)[name])
    return typing.get_args(hint) if typing.get_origin(hint) is typing.Literal else ()


def form_choices(config_type: type, name: str) -> tuple[Any, ...]:
    """The values a form offers for a field: its `Literal` values, else the choices of its `setting` (if any)."""
    return literal_values(config_type, name) or field_metadata(config_type, name).get("choices", ())


def field_metadata(config_type: type, name: str) -> Mapping[str, Any]:
    """The `setting` metadata of a field (empty for a field declared without `setting`)."""
    return next(field.metadata for field in dataclasses.fields(config_type) if field.name == name)


def _without_none(hint: Any) -> Any:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return next(arg for arg in typing.get_args(hint) if arg is not type(None))
    return hint


def field_kind(config_type: type, name: str) -> type:
    """The field's value type without its optional None (int for `int | None`; str for a `Literal` of strings)."""
    hint = _without_none(_type_hints(config_type)[name])
    return str if typing.get_origin(hint) is typing.Literal else hint


def range_problems(config: Any) -> list[str]:
    """What is wrong with a config's values, one sentence each: values outside a field's bounds, not whole numbers
    where whole numbers are needed, NaN or an infinity where a number is needed (NaN passes every bound, and a
    NaN tau once replaced a run's families with none), or not among a `Literal` field's values."""
    problems = []
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if value is not None:
            problems.append(_field_problem(type(config), field, value))
    return [problem for problem in problems if problem]


def raise_if_invalid(config: Any, what: str, extra_problems: Sequence[str] = ()) -> None:
    """Raises SettingsError naming every setting of `config` that is out of range (and any extra problems)."""
    problems = [*range_problems(config), *(p for p in extra_problems if p)]
    if problems:
        raise SettingsError(f"Invalid {what} settings: " + "; ".join(problems) + ".")


class CheckedConfig:
    """Base of the stage configs (frozen dataclasses): made, a config checks every value against its field's
    declared bounds and `Literal` choices, and whatever `other_problems` finds; one SettingsError names them all."""

    settings_name: ClassVar[str] = "stage"
    """How the error names the settings: "SAE" in "Invalid SAE settings: ..."."""

    def __post_init__(self) -> None:
        raise_if_invalid(self, self.settings_name, self.other_problems())

    def other_problems(self) -> list[str]:
        """Problems beyond a single field's range (a field bounded by another, a pattern); "" or none when fine."""
        return []

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Self:
        """The config of these settings (as `dataclasses.asdict` gave them; one left out takes its default); raises
        SettingsError naming any setting the config does not have."""
        unknown = sorted(set(values) - {field.name for field in dataclasses.fields(cls)})
        if unknown:
            raise SettingsError(f"Unknown {cls.settings_name} settings: {', '.join(unknown)}.")
        return cls(**values)


def _field_problem(config_type: type, field: dataclasses.Field, value: Any) -> str:
    kind, allowed = field_kind(config_type, field.name), literal_values(config_type, field.name)
    if allowed and value not in allowed:
        return f"{field.name} must be {_or(allowed)}, got {value!r}"
    low, above, high = (field.metadata.get(bound) for bound in ("minimum", "above", "maximum"))
    if kind is int and (isinstance(value, bool) or not isinstance(value, numbers.Integral)):
        return f"{field.name} must be a whole number, got {value!r}"
    if kind is float and not (isinstance(value, numbers.Real) and math.isfinite(value)):
        return f"{field.name} must be a finite number, got {value!r}"
    too_low = (low is not None and value < low) or (above is not None and value <= above)
    if too_low or (high is not None and value > high):
        return f"{field.name} must be {_range_words(kind, low, above, high)}, got {value!r}"
    return ""


def _range_words(kind: type, low: float | None, above: float | None, high: float | None) -> str:
    noun = "a whole number " if kind is int else ""
    if above is not None:
        return f"{noun}above {above}" + ("" if high is None else f" and at most {high}")
    if high is None:
        return f"{noun}of at least {low}"
    if low is None:
        return f"{noun}of at most {high}"
    return f"{noun}between {low} and {high}"


def _or(values: Sequence[Any]) -> str:
    return ", ".join(map(str, values[:-1])) + f" or {values[-1]}"
