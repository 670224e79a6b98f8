"""The one contract of every labelling backend: name a unit (a feature, a family, a theme) from its documents.

The backends, one module each: `ollama_labeller` (a model on a local or hosted Ollama server) and
`keyword_labeller` (the words a unit's documents share and the corpus lacks, no LLM). The analyst's own labels
(`manual_labels`) are written, not asked for: they need no labeller.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class LabelResult:
    label: str  # short noun phrase, at most MAX_LABEL_WORDS words, plain text
    description: str  # one sentence, at most MAX_DESCRIPTION_CHARS characters (may be empty)
    model: str  # who wrote it: an Ollama model name, or the name of an LLM-free method
    prompt_version: str  # version of the prompts (or method) that produced it


@dataclass(frozen=True)
class LabelRequest:
    """What naming one unit needs: its documents, by position in the dataset, with their texts; and, for a group,
    the labels its members show."""

    kind: str  # "feature", or a kind of group: "family", "theme", "subtheme"
    evidence: Sequence[int]  # positions of the documents where it is strongest, strongest first
    contrast: Sequence[int] = ()  # positions of documents where it is silent
    texts: Mapping[int, str] = field(default_factory=dict)  # position -> text of those documents, for the labellers
    # that read them (an LLM); one that counts the corpus's words (keywords) needs none
    member_labels: Sequence[str] = ()  # a group's: the labels its members show, its headline member's first
    passages: Sequence[str] = ()  # a feature's: the texts of the passages where it fires most, strongest first

    def evidence_texts(self) -> list[str]:
        return [self.texts[position] for position in self.evidence]

    def contrast_texts(self) -> list[str]:
        return [self.texts[position] for position in self.contrast]


class Labeller(Protocol):
    """What a labelling job (`prisma_core.pipeline.labelling`) is given: it never builds one itself (the pipeline's
    `labellers` module does, from the settings)."""

    @property
    def source(self) -> str:
        """Who its labels are stored as coming from: an Ollama model's name, "keywords"."""
        ...

    @property
    def version(self) -> str:
        """The prompt version (or method version) its labels are stored with: a unit holding a label of this
        `source` and version is skipped by a job that does not relabel."""
        ...

    @property
    def host(self) -> str:
        """Where it runs, as a job's summary names it: a server's URL, "" on this computer."""
        ...

    @property
    def n_shown(self) -> tuple[int, int]:
        """(evidence, contrast): how many documents where a unit is strongest, and where it is silent, a request
        holds."""
        ...

    def check(self) -> None:
        """LabellingError with a plain message unless it can label now (a server answers and has the model);
        called before a job writes anything."""
        ...

    def record(self) -> dict[str, Any]:
        """Its settings as a job's stage record keeps them, secrets left out."""
        ...

    def label(self, request: LabelRequest) -> LabelResult:
        """Name the unit; LabellingError when no usable label comes (the unit keeps the labels it had)."""
        ...
