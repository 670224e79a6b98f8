"""Feature and family labels from a local or remote Ollama server, with validated structured answers.

Every request asks for JSON that follows a schema (Ollama's structured outputs). An answer that is not valid
JSON, breaks the schema or gives an unusable label is sent back to the model with the reason, up to
`max_retries` times, then LabellingError is raised. Network problems become LabellingError at once, with
distinct messages for an unreachable server, a missing model and a timeout.

Credentials never show: a hosted server's API key travels as a bearer token and user:password in a host URL
(`https://user:pw@host`) as basic authentication, both held in `Secret`s that print as a mask; the config keeps
the host without them (and refuses a query string, where tokens travel), and every error message is redacted
(`secrets.redact`: the credentials in any form, credential headers a server echoed back) before it is raised.

Replies are bounded (`bounded_http`): at most MAX_REPLY_BYTES, arrived within `timeout_s` of the request.
"""

import base64
import json
import math
import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
import ollama

from prisma_core.config_docs import CheckedConfig, setting
from prisma_core.errors import LabellingError, SettingsError
from prisma_core.interpret.bounded_http import BoundedTransport, ReplyTooLarge
from prisma_core.interpret.labeller import LabelRequest, LabelResult
from prisma_core.interpret.prompts import (
    MAX_LABEL_CHARS,
    MAX_LABEL_WORDS,
    PROMPT_VERSION,
    Message,
    approximate_tokens,
    detection_messages,
    feature_messages,
    group_messages,
    repair_messages,
)
from prisma_core.interpret.secrets import Secret, host_problem, redact, server_text, split_host_credentials

DEFAULT_HOST = "http://localhost:11434"
MAX_REPLY_BYTES = 1_048_576
"""A server's reply may hold at most this many bytes (a label's reply holds a few hundred; the list of models about
500 per model): a bigger one is a failure, never read whole nor stored."""
MAX_DESCRIPTION_CHARS = 300

LABEL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "label": {"type": "string"},
        "description": {"type": "string"},
    },
    "required": ["label", "description"],
}

DETECTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"matches": {"type": "array", "items": {"type": "integer"}}},
    "required": ["matches"],
}

_CONTEXT_MARGIN = 1.5  # the chars/4 token estimate is low for non-English and technical text
_MIN_CONTEXT_TOKENS = 2048
_LABEL_ANSWER_TOKENS = 256
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")
_MARKUP = re.compile(r"<[^>]*>|[*`#_~|\[\]{}\\]")
_EDGE_PUNCTUATION = " \"'.,;:!?-\u2013\u2014\u2018\u2019\u201c\u201d"  # also dashes and curly quotes
_THINKING_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)
API_KEY_ENV = "OLLAMA_API_KEY"

T = TypeVar("T")


def default_ollama_host() -> str:
    """The OLLAMA_HOST environment variable when set, else the local default, read when a config is made."""
    return os.environ.get("OLLAMA_HOST") or DEFAULT_HOST


def default_api_key() -> "Secret | None":
    """The OLLAMA_API_KEY environment variable (a hosted Ollama's key), read when a config is made."""
    key = os.environ.get(API_KEY_ENV, "").strip()
    return Secret(key) if key else None


def _not_a_flag() -> dict[str, bool]:
    """Field metadata: the command line makes no flag for it (a key on a command line ends up in shell history)."""
    return {"cli": False}


@dataclass(frozen=True)
class OllamaConfig(CheckedConfig):
    settings_name = "Ollama"

    host: str = field(default_factory=default_ollama_host)
    """Ollama server URL: $OLLAMA_HOST when set, else http://localhost:11434 (this machine)."""
    model: str = "llama3.2"
    """Any chat model pulled on that server (llama3.2 is 3B: quick on a laptop)."""
    timeout_s: float = setting(60.0, above=0)
    """Bound on connecting and on waiting for each reply, in seconds."""
    max_retries: int = setting(2, minimum=0)
    """Extra attempts after an invalid answer (bad JSON, wrong schema, unusable label)."""
    temperature: float = setting(0.0, minimum=0)
    """Sampling temperature; 0 makes labels reproducible."""
    max_doc_tokens: int = setting(256, minimum=16)
    """Each document is cut to about this many tokens (chars / 4) in prompts."""
    n_evidence: int = setting(8, minimum=1)
    """Top-activating documents shown when labelling a feature."""
    n_contrast: int = setting(8, minimum=0)
    """Non-activating documents shown as contrast."""
    api_key: Secret | None = field(default_factory=default_api_key, repr=False, compare=False, metadata=_not_a_flag())
    """A hosted Ollama's API key, sent as a bearer token; OLLAMA_API_KEY by default; never shown or stored."""
    host_credentials: Secret | None = field(default=None, repr=False, compare=False, metadata=_not_a_flag())
    """"user:password" taken out of the host URL, sent as basic authentication."""

    def __post_init__(self) -> None:
        if not self.host.strip():
            raise SettingsError("host must not be empty")
        host, credentials = split_host_credentials(self.host)
        if problem := host_problem(host):
            raise SettingsError(problem)
        object.__setattr__(self, "host", host)
        if credentials is not None:
            object.__setattr__(self, "host_credentials", credentials)
        if isinstance(self.api_key, str):
            object.__setattr__(self, "api_key", Secret(self.api_key.strip()) if self.api_key.strip() else None)
        if not self.model.strip():
            raise SettingsError("model must not be empty")
        super().__post_init__()

    def auth_headers(self) -> dict[str, str]:
        """The Authorization header: the API key as a bearer token, else the host URL's user:password."""
        if self.api_key:
            return {"Authorization": f"Bearer {self.api_key.reveal()}"}
        if self.host_credentials:
            token = base64.b64encode(self.host_credentials.reveal().encode()).decode()
            return {"Authorization": f"Basic {token}"}
        return {}

    def scrub(self, text: str) -> str:
        """`text` without any credential, of this config or in a URL or header a server echoed back (`redact`)."""
        return redact(text, self._secrets())

    def server_text(self, text: str) -> str:
        """What the server said (an error body), redacted and shortened, for a message that is shown and stored."""
        return server_text(text, self._secrets())

    def _secrets(self) -> tuple[Secret | None, ...]:
        return (self.api_key, self.host_credentials)


class InvalidAnswer(ValueError):
    """The model answered, but not with something usable; the message is sent back to it."""


def clean_text(text: str) -> str:
    """Plain single-line text: control characters and markup removed, whitespace collapsed."""
    without_markup = _MARKUP.sub(" ", _CONTROL_CHARS.sub(" ", text))
    return " ".join(without_markup.split())


def cap_length(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars - 1]
    return cut[: cut.rfind(" ")] + "…" if " " in cut else cut + "…"


def parse_json_object(content: str) -> dict[str, Any]:
    """The JSON object in a reply, tolerating a reasoning block or code fence around it."""
    text = _THINKING_BLOCK.sub("", content).strip()
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise InvalidAnswer("it is not a JSON object")
    try:
        value = json.loads(text[start : end + 1])
    except json.JSONDecodeError as error:
        raise InvalidAnswer(f"it is not valid JSON ({error.msg})") from None
    if not isinstance(value, dict):
        raise InvalidAnswer("it is not a JSON object")
    return value


def parse_label_answer(content: str) -> tuple[str, str]:
    """(label, description) from a reply, cleaned; InvalidAnswer if the label is missing, empty or too long."""
    answer = parse_json_object(content)
    label, description = answer.get("label"), answer.get("description", "")
    if not isinstance(label, str):
        raise InvalidAnswer('the "label" field is missing or not a string')
    if not isinstance(description, str):
        raise InvalidAnswer('the "description" field is not a string')
    label = clean_text(label).strip(_EDGE_PUNCTUATION)
    n_words = len(label.split())
    if n_words == 0:
        raise InvalidAnswer("the label is empty")
    if n_words > MAX_LABEL_WORDS:
        raise InvalidAnswer(f"the label has {n_words} words, at most {MAX_LABEL_WORDS} are allowed")
    if len(label) > MAX_LABEL_CHARS:
        raise InvalidAnswer(f"the label has {len(label):,} characters, at most {MAX_LABEL_CHARS} are allowed")
    return label, cap_length(clean_text(description), MAX_DESCRIPTION_CHARS)


def parse_detection_answer(content: str, n_documents: int) -> list[bool]:
    """One flag per document from a reply listing the (1-based) numbers of the matching documents."""
    matches = parse_json_object(content).get("matches")
    if not isinstance(matches, list):
        raise InvalidAnswer('the "matches" field is missing or not a list')
    numbers = set()
    for item in matches:
        number = int(item) if isinstance(item, str) and item.strip().isdigit() else item
        if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= n_documents:
            raise InvalidAnswer(f'"matches" must hold document numbers from 1 to {n_documents}, got {item!r}')
        numbers.add(number)
    return [i in numbers for i in range(1, n_documents + 1)]


def context_tokens_for(messages: list[Message], answer_tokens: int) -> int:
    """Context window to request: the estimated prompt plus answer with a margin, in steps of 1024 tokens."""
    prompt_tokens = sum(approximate_tokens(message["content"]) for message in messages)
    needed = (prompt_tokens + answer_tokens) * _CONTEXT_MARGIN
    return max(_MIN_CONTEXT_TOKENS, 1024 * math.ceil(needed / 1024))


def has_model(available: list[str], model: str) -> bool:
    """Whether `model` is among the server's models, where a name without a tag means ':latest'."""

    def full(name: str) -> str:
        return name if ":" in name else f"{name}:latest"

    return full(model) in {full(name) for name in available}


class OllamaLabeller:
    """Labels features and families, and runs the detection check, with one Ollama chat model (a `Labeller`)."""

    def __init__(self, config: OllamaConfig):
        self.config = config
        self._client = ollama.Client(
            host=config.host,
            timeout=config.timeout_s,
            headers=config.auth_headers(),
            transport=BoundedTransport(MAX_REPLY_BYTES, config.timeout_s),
        )

    def __enter__(self) -> "OllamaLabeller":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the HTTP connections kept open to the server."""
        self._client.close()

    def list_models(self) -> list[str]:
        with self._translated_errors():
            response = self._client.list()
        return [model.model for model in response.models if model.model]

    def check(self) -> None:
        """Raise LabellingError with a plain message unless the server answers and has the model."""
        available = self.list_models()
        if not has_model(available, self.config.model):
            raise self._missing_model_error(available)

    @property
    def source(self) -> str:
        return self.config.model

    def label(self, request: LabelRequest) -> LabelResult:
        """A feature from its documents; a group from its members' labels (its headline member's first) too."""
        evidence, contrast = request.evidence_texts(), request.contrast_texts()
        if request.kind == "feature":
            return self.label_feature(evidence, contrast)
        headline, *members = request.member_labels or ("",)
        return self.label_group(request.kind, headline, members, evidence, contrast)

    def label_feature(self, evidence: list[str], contrast: list[str]) -> LabelResult:
        evidence = [text for text in evidence if text.strip()][: self.config.n_evidence]
        contrast = [text for text in contrast if text.strip()][: self.config.n_contrast]
        if not evidence:
            raise LabellingError("This feature has no activating documents, so there is nothing to label.")
        messages = feature_messages(evidence, contrast, self.config.max_doc_tokens)
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
        return self._ask(
            messages,
            DETECTION_SCHEMA,
            answer_tokens,
            lambda content: parse_detection_answer(content, len(documents)),
        )

    def _label(self, messages: list[Message]) -> LabelResult:
        label, description = self._ask(messages, LABEL_SCHEMA, _LABEL_ANSWER_TOKENS, parse_label_answer)
        return LabelResult(label, description, self.config.model, PROMPT_VERSION)

    def _ask(
        self,
        messages: list[Message],
        schema: dict[str, Any],
        answer_tokens: int,
        parse: Callable[[str], T],
    ) -> T:
        """Chat until `parse` accepts an answer, sending each invalid answer back with the reason."""
        conversation, last_problem = messages, ""
        for _ in range(self.config.max_retries + 1):
            content = self._chat(conversation, schema, answer_tokens)
            try:
                return parse(content)
            except InvalidAnswer as problem:
                last_problem = str(problem)
                conversation = repair_messages(messages, content, last_problem)
        attempts = self.config.max_retries + 1
        raise LabellingError(
            f"The model '{self.config.model}' gave no usable answer in {attempts} attempts "
            f"(last problem: {last_problem}). Try again, or choose a larger model."
        )

    def _chat(self, messages: list[Message], schema: dict[str, Any], answer_tokens: int) -> str:
        options = {
            "temperature": self.config.temperature,
            "num_ctx": context_tokens_for(messages, answer_tokens),
            "num_predict": answer_tokens,
        }
        with self._translated_errors(missing_model_on_404=True):
            response = self._client.chat(
                model=self.config.model, messages=messages, format=schema, options=options, stream=False
            )
        return response.message.content or ""

    @contextmanager
    def _translated_errors(self, missing_model_on_404: bool = False) -> Iterator[None]:
        try:
            with self._plain_errors(missing_model_on_404):
                yield
        except LabellingError as error:
            raise LabellingError(self.config.scrub(str(error))) from None

    @contextmanager
    def _plain_errors(self, missing_model_on_404: bool) -> Iterator[None]:
        host, timeout = self.config.host, self.config.timeout_s
        try:
            yield
        except ollama.ResponseError as error:
            if missing_model_on_404 and error.status_code == 404:
                raise self._missing_model_error(self._models_or_none()) from None
            if error.status_code in (401, 403):
                given = "the API key" if self.config.api_key else "no API key (or the user and password in the host)"
                raise LabellingError(
                    f"Ollama at {host} refused the request (HTTP {error.status_code}): it was sent {given}. "
                    "Check the key, or set one (OLLAMA_API_KEY, the app's secrets, or the labelling page)."
                ) from None
            raise LabellingError(
                f"Ollama at {host} refused the request: {self.config.server_text(error.error)} "
                f"(HTTP {error.status_code})."
            ) from None
        except (ConnectionError, httpx.ConnectError, httpx.ConnectTimeout):
            raise LabellingError(
                f"Ollama is not reachable at {host}. Start it (the command is: ollama serve) or set the right host."
            ) from None
        except httpx.TimeoutException:
            raise LabellingError(
                f"Ollama at {host} did not answer within {timeout:g} s. The model may still be loading or "
                "too slow for this machine: try again, raise the timeout or choose a smaller model."
            ) from None
        except ReplyTooLarge:
            raise LabellingError(
                f"The server at {host} sent a reply larger than {MAX_REPLY_BYTES:,} bytes; it was not read. Check "
                "that the host is an Ollama server."
            ) from None
        except httpx.HTTPError as error:
            raise LabellingError(
                f"The connection to Ollama at {host} failed: {self.config.server_text(str(error))}."
            ) from None
        except ValueError as error:
            raise LabellingError(
                f"The server at {host} did not reply like Ollama does: {self.config.server_text(str(error))}"
            ) from None

    def _models_or_none(self) -> list[str] | None:
        try:
            return self.list_models()
        except LabellingError:
            return None

    def _missing_model_error(self, available: list[str] | None) -> LabellingError:
        model, host = self.config.model, self.config.host
        if available is None:
            listed = "the list of models could not be read"
        else:
            listed = f"available: {', '.join(sorted(available))}" if available else "no model is installed"
        return LabellingError(
            self.config.scrub(
                f"The model '{model}' is not available on {host} ({listed}). "
                f"Pull it on the server (the command is: ollama pull {model}) or choose another model."
            )
        )
