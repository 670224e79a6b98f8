"""Which text encoding a file is in: UTF-8 (BOM or not), UTF-16 with a BOM, else what charset-normalizer finds, each
candidate checked to decode the whole file into text (binary content is refused)."""

import codecs
from collections.abc import Callable, Iterator
from pathlib import Path

import charset_normalizer

from prisma_core.errors import IngestError

SAMPLE_CHARS = 65_536  # how much of a decoded file the binary-content check looks at
_MAX_UNPRINTABLE_SHARE = 0.05  # real text has almost no control characters; binary data has ~25%
_BLOCK_BYTES = 2**22  # read at a time when checking a file's encoding
WESTERN_FALLBACK = "cp1252"


def decode(name: str, data: bytes, what: str, warnings: list[str]) -> str:
    return data.decode(text_encoding(name, data, what, warnings))


def text_encoding(name: str, data: bytes, what: str, warnings: list[str]) -> str:
    return _encoding_of(name, lambda: iter((data,)), what, warnings)


def file_encoding(name: str, path: Path, what: str, warnings: list[str]) -> str:
    """Like the encoding of a file read whole, reading the file a block at a time."""
    return _encoding_of(name, lambda: _file_blocks(path), what, warnings)


def _file_blocks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as handle:
        while block := handle.read(_BLOCK_BYTES):
            yield block


def _encoding_of(name: str, blocks: Callable[[], Iterator[bytes]], what: str, warnings: list[str]) -> str:
    """UTF-8 (BOM or not), UTF-16 with a BOM, else the encoding charset-normalizer finds in the first bytes (cp1252,
    cp1251, KOI8-R, EUC-JP, Shift-JIS, UTF-16 without a BOM...), with a warning naming it. Each candidate must decode
    the whole file into text; content that decodes as no text is refused as binary."""
    head = next(blocks(), b"")
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        if _decoded_sample(blocks(), "utf-16") is None:
            raise IngestError(f"{name}: starts with a UTF-16 mark but is not valid UTF-16 text")
        candidates = ["utf-16"]
    else:
        candidates = _utf8_then_detected(head, whole=len(head) < _BLOCK_BYTES)
    for encoding in candidates:
        sample = _decoded_sample(blocks(), encoding)
        if sample is not None and _looks_like_text(sample):
            if encoding not in ("utf-8-sig", "utf-16"):
                warnings.append(f"{name}: not UTF-8, decoded as {encoding}")
            return encoding
    raise IngestError(f"{name}: does not look like {what} (binary content); save it as UTF-8 text")


def _utf8_then_detected(head: bytes, whole: bool) -> Iterator[str]:
    """UTF-8 first; the detection only runs for a file that is not UTF-8."""
    yield "utf-8-sig"
    yield from _detected_encodings(head, whole)


def _detected_encodings(head: bytes, whole: bool) -> list[str]:
    """The encodings charset-normalizer finds likely for a file's first bytes (`whole`: they are the whole file),
    most likely first. A sample must end on a character boundary: cut after a line break (b"\n", or b"\n\0" in
    UTF-16)."""
    sample = head[:SAMPLE_CHARS]
    if whole and len(head) <= SAMPLE_CHARS:
        ends = [len(sample)]
    else:
        line_end = sample.rfind(b"\n") + 1
        ends = [line_end, line_end + 1] if line_end else [len(sample) - cut for cut in range(4)]
    found = [match for end in ends for match in sorted(charset_normalizer.from_bytes(sample[:end]), key=_rank)]
    return list(dict.fromkeys(match.encoding for match in found))


def _rank(match: charset_normalizer.CharsetMatch) -> tuple[float, bool]:
    """Least chaotic decoding first; among equally clean ones, Western cp1252 first (a short French or Spanish text
    reads as well in Central European cp1250, which would turn "crème" into "crčme")."""
    return match.chaos, match.encoding != WESTERN_FALLBACK


def _decoded_sample(blocks: Iterator[bytes], encoding: str) -> str | None:
    """The first characters of the content decoded with this encoding, or None if it is not in this encoding."""
    decoder = codecs.getincrementaldecoder(encoding)()
    sample = ""
    try:
        for block in blocks:
            text = decoder.decode(block)
            sample += text[: SAMPLE_CHARS - len(sample)]
        sample += decoder.decode(b"", final=True)[: SAMPLE_CHARS - len(sample)]
    except UnicodeDecodeError:
        return None
    return sample


def _looks_like_text(sample: str) -> bool:
    unprintable = sum(1 for char in sample if not char.isprintable() and char not in "\t\n\r")
    return "\x00" not in sample and unprintable <= _MAX_UNPRINTABLE_SHARE * len(sample)
