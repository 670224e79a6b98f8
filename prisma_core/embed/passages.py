"""Passages: spans of a document's tokens, each inside one model window, cut at sentence ends, with vectors of their
own computed in the same forward pass as the document's vector (the evidence of issue 44: where in a document a
concept is carried).

A window's content tokens are cut greedily: a passage ends after the first token that ends a sentence once it has
MIN_PASSAGE_TOKENS tokens, where a token ends a sentence when its text ends with . ! or ? (perhaps followed by a
closing quote or bracket) and white space or the end of the text comes next, or when a line break follows it (the
tokenizer's character offsets tell). Where no sentence ends by MAX_PASSAGE_TOKENS, the passage ends before the last
word that starts by then (else at MAX_PASSAGE_TOKENS). A window's last passage shorter than MIN_LAST_TOKENS joins the
one before it. A passage never crosses a window boundary: every content token belongs to exactly one passage, and a
document shorter than one passage is one passage (a document without a content token too: its one empty passage
takes the document's own vector).

A passage's vector is the model's own pooling applied to its span: the mean of the final hidden states of its tokens,
in the context of the whole window (`model.span_means`), L2-normalised when the model normalises its sentence
embeddings or the document vectors are normalised. So the token-weighted mean of a window's passage vectors before
normalisation is the window's own mean pooling.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from prisma_core.store.schemas import Passages
from prisma_core.store.vectors import unit_rows

MIN_PASSAGE_TOKENS = 32
"""A passage ends at the first sentence end after at least this many tokens (one long sentence, or a few short ones):
enough for a vector that says what the passage is about, few enough to point at a part of a paragraph."""
MAX_PASSAGE_TOKENS = 96
"""A passage in which no sentence ends is cut by this many tokens (a run-on text, a list, a table)."""
MIN_LAST_TOKENS = 16
"""A window's last passage shorter than this joins the passage before it, which then has at most
MAX_PASSAGE_TOKENS + MIN_LAST_TOKENS - 1 tokens."""

SENTENCE_ENDS = ".!?"
CLOSERS = "\"')]}\u00bb\u201d\u2019"
"""A closing quote or bracket right after a sentence's end belongs to the sentence."""
LINE_BREAKS = "\n\r\u2028\u2029"


def _codes(characters: str) -> np.ndarray:
    return np.array([ord(character) for character in characters], dtype=np.uint32)


_ENDS, _CLOSERS, _BREAKS = _codes(SENTENCE_ENDS), _codes(CLOSERS), _codes(LINE_BREAKS)
_SPACES = _codes("".join(chr(code) for code in range(0x3001) if chr(code).isspace()))


@dataclass(frozen=True)
class PassageSpans:
    """Where the passages of a list of texts lie: in which window, at which tokens, at which characters. Ordered by
    window, then by token."""

    window: np.ndarray
    """[m] int64: the window (chunk) each passage lies in, ascending."""
    tokens: np.ndarray
    """[m, 2] int64: the first and stop position of its tokens in its window's ids (special tokens included)."""
    chars: np.ndarray
    """[m, 2] int64: the start and end of its text in its document's text."""

    def __len__(self) -> int:
        return len(self.window)

    @property
    def n_tokens(self) -> np.ndarray:
        return self.tokens[:, 1] - self.tokens[:, 0]

    def in_windows(self, windows: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """The passages of a batch of windows: their rows here, and their spans as a Pooler takes them ([k, 3]:
        window's row in the batch, first token, stop token), sorted by the window's row."""
        windows = np.asarray(windows, dtype=np.int64)
        first = np.searchsorted(self.window, windows)
        counts = np.searchsorted(self.window, windows, side="right") - first
        rows = concatenated_ranges(first, counts)
        return rows, np.column_stack([np.repeat(np.arange(len(windows)), counts), self.tokens[rows]])


def concatenated_ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """starts[0], starts[0] + 1, ... (counts[0] of them), then the same from starts[1]... in one array, no loop."""
    offsets = np.cumsum(counts) - counts
    return np.repeat(np.asarray(starts) - offsets, counts) + np.arange(int(np.sum(counts)))


def concatenate_spans(parts: Sequence[PassageSpans]) -> PassageSpans:
    if not parts:
        return PassageSpans(np.zeros(0, np.int64), np.zeros((0, 2), np.int64), np.zeros((0, 2), np.int64))
    return PassageSpans(
        np.concatenate([part.window for part in parts]),
        np.concatenate([part.tokens for part in parts]),
        np.concatenate([part.chars for part in parts]),
    )


@dataclass(frozen=True)
class _Marks:
    """What the cuts need to know of a text's characters."""

    length: int
    ends: np.ndarray
    """[length] bool: a sentence may end with this character (. ! ?, or a closer right after one)."""
    space: np.ndarray
    """[length + 1] bool: white space (and past the end)."""
    breaks: np.ndarray
    """[length + 1] int64: line breaks before each character."""

    @classmethod
    def of(cls, text: str) -> _Marks:
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        end = np.isin(codes, _ENDS)
        closed = np.isin(codes, _CLOSERS) & np.concatenate([[False], end[:-1]])
        breaks = np.concatenate([[0], np.cumsum(np.isin(codes, _BREAKS))])
        return cls(len(codes), end | closed, np.append(np.isin(codes, _SPACES), True), breaks)


def plan_passages(
    offsets: Sequence[Sequence[tuple[int, int]]],
    special: Sequence[Sequence[int]],
    owner: np.ndarray,
    texts: Sequence[str],
    first_window: int = 0,
) -> PassageSpans:
    """The passages of tokenised windows: each window's character offsets and special-token mask (as the fast
    tokenizer returns them with `return_offsets_mapping` and `return_special_tokens_mask`) and the text it comes from
    (`owner`, an index into `texts`); windows are numbered from `first_window`."""
    windows, tokens, chars = [], [], []
    marks, marked = None, -1
    for index, (window_offsets, window_special) in enumerate(zip(offsets, special, strict=True)):
        if owner[index] != marked:
            marks, marked = _Marks.of(texts[owner[index]]), owner[index]
        content = np.flatnonzero(np.asarray(window_special) == 0)
        bounds = _cuts(np.asarray(window_offsets, dtype=np.int64)[content], marks)
        lead = int(content[0]) if len(content) else 0
        windows.append(np.full(len(bounds) - 1, first_window + index, dtype=np.int64))
        tokens.append(np.column_stack([bounds[:-1], bounds[1:]]) + lead)
        chars.append(_characters(np.asarray(window_offsets, dtype=np.int64)[content], bounds, marks.length))
    return concatenate_spans([PassageSpans(*parts) for parts in zip(windows, tokens, chars, strict=True)])


def _characters(offsets: np.ndarray, bounds: np.ndarray, length: int) -> np.ndarray:
    """[k, 2] start of each passage's first token and end of its last; a window without tokens: the whole text."""
    if not len(offsets):
        return np.array([[0, length]], dtype=np.int64)
    return np.column_stack([offsets[bounds[:-1], 0], offsets[bounds[1:] - 1, 1]])


def _cuts(offsets: np.ndarray, marks: _Marks) -> np.ndarray:
    """[0, ..., n]: where each passage of a window's n content tokens (their character offsets) starts, then n."""
    n = len(offsets)
    if n == 0:
        return np.array([0, 0], dtype=np.int64)
    last_character = np.clip(offsets[:, 1] - 1, 0, max(marks.length - 1, 0))
    ends_sentence = marks.ends[last_character] & marks.space[offsets[:, 1]]
    next_start = np.append(offsets[1:, 0], marks.length)
    ends_line = marks.breaks[next_start] > marks.breaks[offsets[:, 1]]
    after_sentence = (np.flatnonzero((ends_sentence | ends_line)[:-1]) + 1).tolist()
    before_word = (np.flatnonzero(offsets[1:, 0] > offsets[:-1, 1]) + 1).tolist()
    bounds = [0]
    while bounds[-1] < n:
        low, high = bounds[-1] + MIN_PASSAGE_TOKENS, bounds[-1] + MAX_PASSAGE_TOKENS
        sentence = bisect.bisect_left(after_sentence, low)
        word = bisect.bisect_right(before_word, high) - 1
        if sentence < len(after_sentence) and after_sentence[sentence] <= high:
            bounds.append(after_sentence[sentence])
        elif n <= high:
            bounds.append(n)
        else:
            bounds.append(before_word[word] if word >= 0 and before_word[word] >= low else high)
    if len(bounds) > 2 and bounds[-1] - bounds[-2] < MIN_LAST_TOKENS:
        del bounds[-2]
    return np.asarray(bounds, dtype=np.int64)


def pooled_passages(
    spans: PassageSpans, owner: np.ndarray, window_vectors: np.ndarray, means: np.ndarray, normalize: bool
) -> Passages:
    """The passages of texts from their spans, the owner text of each window, the windows' vectors and the
    passages' mean token states (`means`, as the Pooler gave them); empty passages take their window's vector."""
    n_tokens = spans.n_tokens
    vectors = np.where((n_tokens == 0)[:, None], window_vectors[spans.window], means).astype(np.float32)
    if normalize:
        vectors = unit_rows(vectors)
    position = owner[spans.window]
    number = np.arange(len(position)) - np.searchsorted(position, position)
    return Passages(
        position.astype(np.int64),
        number.astype(np.int32),
        spans.chars[:, 0].copy(),
        spans.chars[:, 1].copy(),
        n_tokens.astype(np.int32),
        vectors,
    )
