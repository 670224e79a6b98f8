"""Reading an Ollama model's replies: the JSON object in it, checked against what was asked (a label, the documents
that match one); `InvalidAnswer` says what is wrong, in words the model is sent back."""

import json
import re
from typing import Any

from prisma_core.interpret.prompts import MAX_LABEL_CHARS, MAX_LABEL_WORDS

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

_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")
_MARKUP = re.compile(r"<[^>]*>|[*`#_~|\[\]{}\\]")
_EDGE_PUNCTUATION = " \"'.,;:!?-\u2013\u2014\u2018\u2019\u201c\u201d"  # also dashes and curly quotes
_THINKING_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)


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
