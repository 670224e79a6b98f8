"""The Ollama embedding backend: an Ollama server embeds each window (the `ollama` client's `embed`, /api/embed), with
the model `EmbedConfig.model` names there (e.g. all-minilm); chunk-and-average is ours, as for every backend.

Windows are cut at word boundaries, at most WINDOW_TOKENS tokens each by the chars/4 estimate (the server's
tokenizer is not ours to read), so the model reads each whole. The server is $OLLAMA_HOST (the local default
otherwise), a hosted one's key $OLLAMA_API_KEY (sent as a bearer token, never shown).

Replies are bounded (`bounded_http`): at most MAX_REPLY_BYTES, arrived within the timeout ($PRISMA_OLLAMA_TIMEOUT_S,
DEFAULT_TIMEOUT_S by default). A reply that is not one finite vector per window, all of one length (the length of
the first reply), is an EmbeddingError; nothing of the batch is kept.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import httpx
import numpy as np
import ollama

from prisma_core.bounded_http import BoundedTransport, ReplyTooLarge
from prisma_core.embed.chunking import Chunking
from prisma_core.embed.config import EmbedConfig
from prisma_core.errors import EmbeddingError

DEFAULT_HOST = "http://localhost:11434"
WINDOW_TOKENS = 200
"""A window's content, in tokens of about CHARS_PER_TOKEN characters: under the 256 of small embedding models."""
CHARS_PER_TOKEN = 4
MAX_REPLY_BYTES = 64 * 1_048_576
"""A reply may hold at most this many bytes: a batch of 16 windows of 1,024 numbers is about 400 KB."""
DEFAULT_TIMEOUT_S = 120.0
TIMEOUT_ENV = "PRISMA_OLLAMA_TIMEOUT_S"


def split_words(text: str, max_chars: int) -> list[str]:
    """`text`'s words in contiguous windows of at most `max_chars` characters (a longer word cut), one window at
    least (an empty text's is empty)."""
    windows: list[str] = []
    current: list[str] = []
    size = 0
    for word in text.split():
        for piece in (word[start : start + max_chars] for start in range(0, len(word), max_chars)):
            if current and size + 1 + len(piece) > max_chars:
                windows.append(" ".join(current))
                current, size = [], 0
            size += len(piece) + (1 if current else 0)
            current.append(piece)
    return [*windows, " ".join(current)] if current or not windows else windows


class OllamaEmbedder:
    """An `Embedder` asking the Ollama server at `host` to embed with `model`."""

    pools_by_mean = False  # no token states come back: no passages
    normalizes = False  # as far as we know: chunk-and-average normalises when the settings ask

    def __init__(self, model: str, host: str, timeout_s: float, api_key: str = "") -> None:
        self.model, self.host, self.timeout_s = model, host, timeout_s
        self.dimension: int | None = None
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        transport = BoundedTransport(MAX_REPLY_BYTES, timeout_s)
        self._client = ollama.Client(host=host, timeout=timeout_s, headers=headers, transport=transport)

    def windows(self, texts: Sequence[str], passages: bool = False) -> Chunking:
        per_text = [split_words(text, WINDOW_TOKENS * CHARS_PER_TOKEN) for text in texts]
        counts = np.fromiter((len(windows) for windows in per_text), np.int64, len(per_text))
        tokens = [sum(math.ceil(len(window) / CHARS_PER_TOKEN) for window in windows) for windows in per_text]
        return Chunking(
            window=WINDOW_TOKENS,
            tokens_per_doc=np.asarray(tokens, np.int64),
            chunks_per_doc=counts,
            chunk_ids=[window for windows in per_text for window in windows],
            chunk_owner=np.repeat(np.arange(len(texts)), counts),
        )

    def embed(self, windows: Sequence[Any]) -> np.ndarray:
        with self._plain_errors():
            reply = self._client.embed(model=self.model, input=list(windows), truncate=True)
        vectors = self._checked(reply.embeddings, len(windows))
        self.dimension = vectors.shape[1]
        return vectors

    def _checked(self, embeddings: Sequence[Sequence[Any]] | None, n_windows: int) -> np.ndarray:
        """[n_windows, d] float32, or EmbeddingError naming what is wrong with the reply."""
        rows = list(embeddings or [])
        where = f"The Ollama server at {self.host} (model {self.model!r})"
        if len(rows) != n_windows:
            raise EmbeddingError(f"{where} sent {len(rows)} vectors for {n_windows} texts; nothing was stored.")
        lengths = sorted({len(row) for row in rows}) or [self.dimension or 0]
        if len(lengths) > 1 or (rows and not lengths[0]):
            raise EmbeddingError(
                f"{where} sent vectors of {' and '.join(map(str, lengths))} numbers in one reply; nothing was "
                "stored. Is it an embedding model?"
            )
        if self.dimension and lengths[0] != self.dimension:
            raise EmbeddingError(
                f"{where} sent vectors of {lengths[0]} numbers where {self.dimension} were expected (its first "
                "reply's); nothing was stored."
            )
        not_numbers = EmbeddingError(f"{where} sent something other than finite numbers; nothing was stored.")
        try:
            vectors = np.asarray(rows, dtype=np.float64)
        except (TypeError, ValueError):
            raise not_numbers from None
        if not np.isfinite(vectors).all():
            raise not_numbers
        return vectors.astype(np.float32)

    @contextmanager
    def _plain_errors(self) -> Iterator[None]:
        where = f"Ollama at {self.host}"
        try:
            yield
        except ollama.ResponseError as error:
            if error.status_code == 404:
                raise EmbeddingError(
                    f"{where} has no model {self.model!r}: pull it there (ollama pull {self.model})."
                ) from None
            raise EmbeddingError(f"{where} refused to embed (HTTP {error.status_code}): {error.error[:200]}") from None
        except (ConnectionError, httpx.ConnectError, httpx.ConnectTimeout):
            raise EmbeddingError(f"{where} is not reachable: start it (ollama serve) or set OLLAMA_HOST.") from None
        except httpx.TimeoutException:
            raise EmbeddingError(
                f"{where} did not embed within {self.timeout_s:g} s; nothing was stored. Raise {TIMEOUT_ENV}."
            ) from None
        except ReplyTooLarge:
            raise EmbeddingError(
                f"{where} sent a reply larger than {MAX_REPLY_BYTES:,} bytes; it was not read."
            ) from None
        except (httpx.HTTPError, ValueError) as error:
            raise EmbeddingError(f"{where} did not reply like Ollama does ({type(error).__name__}).") from None


def timeout_s() -> float:
    """$PRISMA_OLLAMA_TIMEOUT_S (seconds, 1 to 3,600), else DEFAULT_TIMEOUT_S."""
    given = os.environ.get(TIMEOUT_ENV, "").strip()
    try:
        seconds = float(given) if given else DEFAULT_TIMEOUT_S
    except ValueError:
        seconds = math.nan
    if not 1 <= seconds <= 3_600:
        raise EmbeddingError(f"{TIMEOUT_ENV} must be a number of seconds from 1 to 3600, got {given!r}.")
    return seconds


def load_embedder(config: EmbedConfig) -> OllamaEmbedder:
    """The backend's `Embedder` (embed/backends.py), on the server of $OLLAMA_HOST."""
    host = os.environ.get("OLLAMA_HOST", "").strip() or DEFAULT_HOST
    return OllamaEmbedder(config.model, host, timeout_s(), os.environ.get("OLLAMA_API_KEY", "").strip())
