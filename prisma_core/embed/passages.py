"""Passages: spans of a document's tokens, each inside one model window, cut at sentence ends, with vectors of their
own computed in the same forward pass as the document's vector (the evidence of issue 44: where in a document a
concept is carried).

A window's content tokens are cut greedily: a passage ends after the first token that ends a sentence once it has
MIN_PASSAGE_TOKENS tokens, where a token ends a sentence when its text ends with . ! or ? (perhaps followed by a
closing quote or bracket) and white space or the end of the text comes next, or when a line break follows it (the
tokenizer's character offsets tell). Where no sentence ends by MAX_PASSAGE_TOKENS, the passage ends before the last
word that starts by then (else at MAX_PASSAGE_TOKENS). A window's last passage shorter than MIN_LAST_TOKENS joins the
one before it. A passage never crosses a window boundary: every content token belongs to exactly one passage, and a
document shorter than one passage is one passage (a document without a content token too).

A passage's vector is the model's own pooling applied to its span: the mean of the final hidden states of its tokens,
in the context of the whole window (`model.span_means`), L2-normalised when the model normalises its sentence
embeddings or the document vectors are normalised. A window's special tokens ([CLS], [SEP]) are pooled with its first
and last passage, as the model pools them with the window: so the mean of a window's passage means weighted by their
pooled tokens is the window's own mean pooling (exactly, up to rounding; content tokens alone gave cosines down to
0.96 on short texts), and a document of one passage has its document vector as its passage vector.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, fields

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


_END, _CLOSER, _BREAK, _SPACE = 1, 2, 4, 8
_LAST_MARKED = 0x3001
"""Every character marked has a code point below this one (U+3000 is the last white space)."""


def _kinds() -> np.ndarray:
    """What each code point up to _LAST_MARKED is, as bits (_END, ...): looked up once per text, for all of it."""
    kinds = np.zeros(_LAST_MARKED + 1, dtype=np.uint8)
    for kind, characters in ((_END, SENTENCE_ENDS), (_CLOSER, CLOSERS), (_BREAK, LINE_BREAKS)):
        kinds[[ord(character) for character in characters]] |= kind
    kinds[[code for code in range(_LAST_MARKED) if chr(code).isspace()]] |= _SPACE
    return kinds


_KINDS = _kinds()


@dataclass(frozen=True)
class PassageSpans:
    """Where the passages of a list of texts lie: in which window, at which tokens, at which characters. Ordered by
    window, then by token."""

    window: np.ndarray
    """[m] int64: the window (chunk) each passage lies in, ascending."""
    tokens: np.ndarray
    """[m, 2] int64: the first and stop position of its content tokens in its window's ids."""
    pooled: np.ndarray
    """[m, 2] int64: the first and stop position of the tokens pooled into its vector: its content tokens, and the
    window's special tokens before them for its first passage and after them for its last."""
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
        return rows, np.column_stack([np.repeat(np.arange(len(windows)), counts), self.pooled[rows]])


def concatenated_ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """starts[0], starts[0] + 1, ... (counts[0] of them), then the same from starts[1]... in one array, no loop."""
    offsets = np.cumsum(counts) - counts
    return np.repeat(np.asarray(starts) - offsets, counts) + np.arange(int(np.sum(counts)))


def concatenate_spans(parts: Sequence[PassageSpans]) -> PassageSpans:
    if not parts:
        return PassageSpans(np.zeros(0, np.int64), *(np.zeros((0, 2), np.int64) for _ in range(3)))
    return PassageSpans(*(np.concatenate([getattr(part, field.name) for part in parts]) for field in fields(parts[0])))


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
        kinds = _KINDS[np.minimum(codes, _LAST_MARKED)]
        end = (kinds & _END) > 0
        closed = ((kinds & _CLOSER) > 0) & np.concatenate([[False], end[:-1]])
        breaks = np.concatenate([[0], np.cumsum((kinds & _BREAK) > 0)])
        return cls(len(codes), end | closed, np.append((kinds & _SPACE) > 0, True), breaks)


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
    spans = []
    marks, marked = None, -1
    for index, (window_offsets, window_special) in enumerate(zip(offsets, special, strict=True)):
        if owner[index] != marked:
            marks, marked = _Marks.of(texts[owner[index]]), owner[index]
        content = np.flatnonzero(np.asarray(window_special) == 0)
        content_offsets = np.asarray(window_offsets, dtype=np.int64).reshape(-1, 2)[content]
        bounds = _cuts(content_offsets, marks)
        tokens = np.column_stack([bounds[:-1], bounds[1:]]) + (int(content[0]) if len(content) else 0)
        pooled = tokens.copy()
        pooled[0, 0], pooled[-1, 1] = 0, len(window_special)  # the window's special tokens, as the model pools them
        window = np.full(len(tokens), first_window + index, dtype=np.int64)
        spans.append(PassageSpans(window, tokens, pooled, _characters(content_offsets, bounds, marks.length)))
    return concatenate_spans(spans)


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
    ends_sentence = marks.ends[np.maximum(offsets[:, 1] - 1, 0)] & marks.space[offsets[:, 1]]
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


def pooled_passages(spans: PassageSpans, owner: np.ndarray, means: np.ndarray, normalize: bool) -> Passages:
    """The passages of texts from their spans, the text each window comes from (`owner`) and the passages' mean
    token states (`means`, as the Pooler gave them)."""
    position = owner[spans.window]
    number = np.arange(len(position)) - np.searchsorted(position, position)
    return Passages(
        position.astype(np.int64),
        number.astype(np.int32),
        spans.chars[:, 0].copy(),
        spans.chars[:, 1].copy(),
        spans.n_tokens.astype(np.int32),
        unit_rows(means) if normalize else means,
    )
