"""Which text encoding a file is in: UTF-8 (BOM or not), UTF-16 with a BOM, UTF-8 mixed with lines in another
encoding, else what charset-normalizer finds, the encodings people use first, each candidate's decoded text checked
and the whole file decoded with it (binary content is refused)."""

import codecs
from collections.abc import Callable, Iterator
from pathlib import Path

import charset_normalizer
from charset_normalizer.cd import encoding_languages
from charset_normalizer.md import mess_ratio

from prisma_core.errors import IngestError

SAMPLE_CHARS = 65_536  # how much of a decoded file the binary-content check looks at
_MAX_UNPRINTABLE_SHARE = 0.05  # real text has almost no control characters; binary data has ~25%
_BLOCK_BYTES = 2**22  # read at a time when checking a file's encoding
WESTERN_FALLBACK = "cp1252"
COMMON_ENCODINGS = (
    *("cp1252", "latin_1", "iso8859_15", "cp1251", "cp1250", "koi8_r", "cp932", "shift_jis", "euc_jis_2004", "euc_jp"),
    *("gb18030", "gb2312", "big5", "cp949", "euc_kr", "cp1254", "cp1253", "cp1255", "cp1256", "cp1257", "cp1258"),
    *("koi8_u", "iso8859_2", "iso8859_5", "iso8859_7", "iso8859_9", "cp866", "cp874", "tis_620"),
    *("utf_16", "utf_16_le", "utf_16_be", "utf_32"),
)
"""The encodings files are actually saved in (Windows and ISO code pages, KOI8, the East Asian ones, UTF-16), the
most used first: of decodings that look as clean, the first here wins, and any of them wins over a rarer encoding
(Mac Cyrillic or Greek, Kazakh, old DOS pages); a file detected as a rarer one is also tried in the common ones of its
languages."""
MESS_TOLERANCE = 0.1
"""Decodings whose text is at most this much messier than the cleanest (charset-normalizer's mess ratio of the decoded
start of the file) count as equally clean."""


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
            if encoding.startswith(MIXED_PREFIX):
                warnings.append(
                    f"{name}: mixes UTF-8 with another encoding; its other lines decoded as "
                    f"{encoding.removeprefix(MIXED_PREFIX)}"
                )
            elif encoding not in ("utf-8-sig", "utf-16"):
                warnings.append(f"{name}: not UTF-8, decoded as {encoding}")
            return encoding
    raise IngestError(f"{name}: does not look like {what} (binary content); save it as UTF-8 text")


def _utf8_then_detected(head: bytes, whole: bool) -> Iterator[str]:
    """UTF-8 first; then, for a file that is not UTF-8, UTF-8 mixed with another encoding, then the detected ones."""
    yield "utf-8-sig"
    yield from _mixed_with_utf8(head)
    yield from _ranked(head, _detected_encodings(head, whole))


def _mixed_with_utf8(head: bytes) -> list[str]:
    """The codec of a file that holds lines of UTF-8 text (a character of several bytes that is valid UTF-8) and
    lines that are not UTF-8 (files joined from two sources), named after the encoding detected in the latter."""
    lines = head.decode("utf-8", errors="surrogateescape").split("\n")
    foreign = [line for line in lines if any(0xDC80 <= ord(char) <= 0xDCFF for char in line)]
    utf8 = [line for line in lines if not line.isascii() and line not in foreign]
    if not foreign or not utf8:
        return []
    other = "\n".join(foreign).encode("utf-8", errors="surrogateescape")
    detected = _ranked(other, _detected_encodings(other, whole=True))
    if detected and not _languages(detected[0]):  # a multi-byte encoding (EUC-JP...) whose bytes pass for UTF-8
        return []
    return [mixed_codec(detected[0] if detected else WESTERN_FALLBACK)]


def _ranked(head: bytes, detected: list[str]) -> list[str]:
    """The detected encodings, with the common ones of their languages for a rare one, ranked by their decoded text:
    the cleanest first (within MESS_TOLERANCE), among them the common encodings first, in detection order."""
    siblings = [
        common
        for encoding in detected
        if not _common(encoding) and _languages(encoding)
        for common in COMMON_ENCODINGS
        if set(_languages(common)) & set(_languages(encoding))
    ]
    candidates = list(dict.fromkeys([*detected, *siblings]))
    mess = {encoding: _mess(head, encoding) for encoding in candidates}
    clean = min(mess.values(), default=1.0)
    return sorted(candidates, key=lambda encoding: (mess[encoding] > clean + MESS_TOLERANCE, _usage_rank(encoding)))


def _mess(head: bytes, encoding: str) -> float:
    """How messy the start of the file reads in this encoding (1.0: it does not decode)."""
    decoded = _decoded_sample(iter((_sample_to_line_end(head),)), encoding)
    return mess_ratio(decoded) if decoded else 1.0


def _sample_to_line_end(head: bytes) -> bytes:
    """The first SAMPLE_CHARS bytes, cut after their last line break (a character's bytes are never split)."""
    sample = head[:SAMPLE_CHARS]
    return sample if len(head) <= SAMPLE_CHARS else sample[: sample.rfind(b"\n") + 1] or sample


def _usage_rank(encoding: str) -> int:
    """Its place in COMMON_ENCODINGS; a rarer encoding comes after all of them."""
    name = codecs.lookup(encoding).name
    common = [codecs.lookup(known).name for known in COMMON_ENCODINGS]
    return common.index(name) if name in common else len(common)


def _common(encoding: str) -> bool:
    return _usage_rank(encoding) < len(COMMON_ENCODINGS)


def _languages(encoding: str) -> list[str]:
    """The languages a single-byte code page writes ([] for a multi-byte one)."""
    try:
        return encoding_languages(encoding)
    except OSError:
        return []


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


MIXED_PREFIX = "prisma_utf_8_or_"
"""The name of a codec that decodes UTF-8 and, where bytes are not UTF-8, the encoding its name ends with."""


def mixed_codec(fallback: str) -> str:
    """The name of the codec decoding UTF-8 with `fallback` for what is not UTF-8 (usable wherever a codec's name
    is: pandas, open(), bytes.decode)."""
    codecs.lookup(fallback)
    return MIXED_PREFIX + codecs.lookup(fallback).name.replace("-", "_")


def _find_mixed_codec(name: str) -> codecs.CodecInfo | None:
    if not name.startswith(MIXED_PREFIX):
        return None
    fallback = name.removeprefix(MIXED_PREFIX)
    handler = f"prisma_decode_as_{fallback}"
    codecs.register_error(handler, lambda error: (error.object[error.start : error.end].decode(fallback), error.end))

    class Decoder(codecs.BufferedIncrementalDecoder):
        def _buffer_decode(self, data: bytes, errors: str, final: bool) -> tuple[str, int]:
            return codecs.utf_8_decode(data, handler, final)

    return codecs.CodecInfo(
        name=name,
        encode=codecs.utf_8_encode,
        decode=lambda data, errors="strict": codecs.utf_8_decode(bytes(data), handler, True),
        incrementaldecoder=Decoder,
        incrementalencoder=codecs.getincrementalencoder("utf-8"),
        streamreader=codecs.getreader("utf-8"),
        streamwriter=codecs.getwriter("utf-8"),
    )


codecs.register(_find_mixed_codec)
