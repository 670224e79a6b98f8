"""Feature, family and theme labels from a model on a local or hosted Ollama server (a `Labeller`), and the
detection check of a label.

The prompts are `prompts`; the connection, its credentials and the retries of an invalid answer are
`ollama_client` (with `ollama_config`); reading a reply is `replies`.
"""

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from prisma_core.errors import LabellingError
from prisma_core.interpret.labeller import LabelRequest, LabelResult
from prisma_core.interpret.ollama_client import OllamaClient
from prisma_core.interpret.ollama_config import OllamaConfig
from prisma_core.interpret.prompts import (
    PROMPT_VERSION,
    Message,
    detection_messages,
    feature_messages,
    group_messages,
)
from prisma_core.interpret.replies import DETECTION_SCHEMA, LABEL_SCHEMA, parse_detection_answer, parse_label_answer

_LABEL_ANSWER_TOKENS = 256


class OllamaLabeller:
    """Labels features and families, and runs the detection check, with one Ollama chat model (a `Labeller`)."""

    def __init__(self, config: OllamaConfig):
        self.config = config
        self.client = OllamaClient(config)

    def __enter__(self) -> "OllamaLabeller":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.client.close()

    def check(self) -> None:
        """Raise LabellingError with a plain message unless the server answers and has the model."""
        self.client.check()

    @property
    def source(self) -> str:
        return self.config.model

    @property
    def version(self) -> str:
        return PROMPT_VERSION

    @property
    def host(self) -> str:
        return self.config.host

    @property
    def n_shown(self) -> tuple[int, int]:
        return self.config.n_evidence, self.config.n_contrast

    def record(self) -> dict[str, Any]:
        """The server's settings, its secrets left out."""
        return {
            "ollama": {
                setting.name: getattr(self.config, setting.name) for setting in fields(self.config) if setting.repr
            }
        }

    def label(self, request: LabelRequest) -> LabelResult:
        """A feature from its documents; a group from its members' labels (its headline member's first) too."""
        evidence, contrast = request.evidence_texts(), request.contrast_texts()
        if request.kind == "feature":
            return self.label_feature(evidence, contrast, request.passages)
        headline, *members = request.member_labels or ("",)
        return self.label_group(request.kind, headline, members, evidence, contrast)

    def label_feature(self, evidence: list[str], contrast: list[str], passages: Sequence[str] = ()) -> LabelResult:
        evidence = [text for text in evidence if text.strip()][: self.config.n_evidence]
        contrast = [text for text in contrast if text.strip()][: self.config.n_contrast]
        if not evidence:
            raise LabellingError("This feature has no activating documents, so there is nothing to label.")
        passages = [text for text in passages if text.strip()][: self.config.n_evidence]
        messages = feature_messages(evidence, contrast, self.config.max_doc_tokens, passages)
        return self._label(messages)

    def label_group(
        self,
        kind: str,
        headline_label: str,
        member_labels: list[str],
        evidence: Sequence[str] = (),
        contrast: Sequence[str] = (),
    ) -> LabelResult:
        """Name a group of features (a family, a theme) from its members' labels and its documents."""
        if not headline_label.strip():
            raise LabellingError(f"A {kind} needs a labelled first member before it can be labelled.")
        evidence = [text for text in evidence if text.strip()][: self.config.n_evidence]
        contrast = [text for text in contrast if text.strip()][: self.config.n_contrast]
        messages = group_messages(kind, headline_label, member_labels, evidence, contrast, self.config.max_doc_tokens)
        return self._label(messages)

    def label_family(self, parent_label: str, child_labels: list[str]) -> LabelResult:
        """A family from its parent's and children's labels only."""
        return self.label_group("family", parent_label, child_labels)

    def detect(self, label: str, documents: list[str]) -> list[bool]:
        """For each document, in order, whether the model judges that it expresses the label."""
        if not documents:
            return []
        messages = detection_messages(label, documents, self.config.max_doc_tokens)
        answer_tokens = 64 + 8 * len(documents)
        return self.client.ask(
            messages,
            DETECTION_SCHEMA,
            answer_tokens,
            lambda content: parse_detection_answer(content, len(documents)),
        )

    def _label(self, messages: list[Message]) -> LabelResult:
        label, description = self.client.ask(messages, LABEL_SCHEMA, _LABEL_ANSWER_TOKENS, parse_label_answer)
        return LabelResult(label, description, self.config.model, PROMPT_VERSION)
