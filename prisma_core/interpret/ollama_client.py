"""A connection to one Ollama server and model: chat requests that ask for JSON following a schema (Ollama's
structured outputs), retried until the reply parses, and every failure turned into a LabellingError in plain words.

An answer that is not valid JSON, breaks the schema or is unusable (`replies.InvalidAnswer`) is sent back to the
model with the reason, up to `max_retries` times, then LabellingError is raised. Network problems become
LabellingError at once, with distinct messages for an unreachable server, a missing model and a timeout; every
message is redacted (`OllamaConfig.scrub`) before it is raised.

Replies are bounded (`bounded_http`): at most MAX_REPLY_BYTES, arrived within `timeout_s` of the request; what a
reply says (a model's answer, the names of the models) is rid of every form of the config's credentials before
anything parses, shows or stores it (`OllamaConfig.reply_text`).
"""

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import httpx
import ollama

from prisma_core.bounded_http import BoundedTransport, ReplyTooLarge
from prisma_core.errors import LabellingError
from prisma_core.interpret.ollama_config import OllamaConfig
from prisma_core.interpret.prompts import Message, approximate_tokens, repair_messages
from prisma_core.interpret.replies import InvalidAnswer

MAX_REPLY_BYTES = 1_048_576
"""A server's reply may hold at most this many bytes (a label's reply holds a few hundred; the list of models about
500 per model): a bigger one is a failure, never read whole nor stored."""
_CONTEXT_MARGIN = 1.5  # the chars/4 token estimate is low for non-English and technical text
_MIN_CONTEXT_TOKENS = 2048

T = TypeVar("T")


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


class OllamaClient:
    """Chat with `config.model` on `config.host`, and list the server's models."""

    def __init__(self, config: OllamaConfig):
        self.config = config
        self._client = ollama.Client(
            host=config.host,
            timeout=config.timeout_s,
            headers=config.auth_headers(),
            transport=BoundedTransport(MAX_REPLY_BYTES, config.timeout_s),
        )

    def __enter__(self) -> "OllamaClient":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the HTTP connections kept open to the server."""
        self._client.close()

    def list_models(self) -> list[str]:
        with self._translated_errors():
            response = self._client.list()
        return [self.config.reply_text(model.model) for model in response.models if model.model]

    def check(self) -> None:
        """Raise LabellingError with a plain message unless the server answers and has the model."""
        available = self.list_models()
        if not has_model(available, self.config.model):
            raise self._missing_model_error(available)

    def ask(
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
                return self._without_secrets(parse(content))  # again once parsed: JSON escapes can hide a secret
            except InvalidAnswer as problem:
                last_problem = self.config.reply_text(str(problem))
                conversation = repair_messages(messages, content, last_problem)
        attempts = self.config.max_retries + 1
        raise LabellingError(
            f"The model '{self.config.model}' gave no usable answer in {attempts} attempts "
            f"(last problem: {last_problem}). Try again, or choose a larger model."
        )

    def _without_secrets(self, answer: T) -> T:
        """A parsed answer's texts (a label and its description) rid of the config's credentials."""
        if isinstance(answer, str):
            return self.config.reply_text(answer)
        if isinstance(answer, tuple):
            return tuple(self._without_secrets(part) for part in answer)
        return answer

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
        return self.config.reply_text(response.message.content or "")

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
