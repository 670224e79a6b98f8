"""File names, sizes and zips: every limit is checked on the bytes actually unpacked (zip bombs, unsafe paths)."""

import io
import os
import re
import stat
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath

from prisma_core.errors import IngestError
from prisma_core.ingest.config import SUPPORTED_EXTENSIONS, IngestConfig, Source

_CHUNK_BYTES = 2**20
_OS_CLUTTER = re.compile(r"(^|/)(__MACOSX/|\.[^/]*$)")  # macOS resource forks, .DS_Store and other hidden files
_UNSAFE_PATH = re.compile(r"^[/\\]|^[A-Za-z]:|(^|[/\\])\.\.([/\\]|$)")


def unpack(sources: Sequence[Source], config: IngestConfig, warnings: list[str]) -> list[list[Source]]:
    """Checks names and sizes; each source's files: itself, or a zip's members (names are paths inside the zip)."""
    for name, data in sources:
        check_extension(name)
        check_file_size(name, len(data), config)
        check_not_empty(name, len(data))
    check_total_size(sum(len(data) for _, data in sources), config)
    budget = config.max_total_bytes - sum(len(data) for name, data in sources if not _is_zip(name))
    files: list[list[Source]] = []
    for name, data in sources:
        if _is_zip(name):
            members = _unzip(name, data, config, budget, warnings)
            budget -= sum(len(content) for _, content in members)
            files.append(members)
        else:
            files.append([(name, data)])
    return files


def check_not_empty(name: str, size: int) -> None:
    if not size:
        raise IngestError(f"{name}: the file is empty (0 bytes)")


def _unzip(name: str, data: bytes, config: IngestConfig, budget: int, warnings: list[str]) -> list[Source]:
    archive = open_zip(name, data, "zip archive")
    with archive:
        infos = archive.infolist()
        if len(infos) > config.max_zip_members:
            raise IngestError(f"{name}: holds {len(infos):,} files; the limit is {config.max_zip_members:,}")
        unsafe = [info.filename for info in infos if _UNSAFE_PATH.search(info.filename)]
        if unsafe:
            raise IngestError(f"{name}: refused, it holds unsafe paths ({', '.join(unsafe[:5])})")
        wanted = [info for info in infos if not info.is_dir() and not _OS_CLUTTER.search(info.filename)]
        nested = [info.filename for info in wanted if _is_zip(info.filename)]
        if nested:
            raise IngestError(f"{name}: zips inside a zip are not supported ({', '.join(nested[:5])})")
        supported = [info for info in wanted if extension(info.filename) in SUPPORTED_EXTENSIONS]
        if len(supported) < len(wanted):
            skipped = [info.filename for info in wanted if info not in supported]
            warnings.append(f"{name}: skipped unsupported files: {', '.join(skipped[:10])}")
        members = []
        for info in supported:
            content = _inflate(archive, info, min(budget, config.max_file_bytes), name)
            budget -= len(content)
            members.append((info.filename, content))
    if not members:
        raise IngestError(f"{name}: holds no supported files ({', '.join(SUPPORTED_EXTENSIONS)})")
    return members


def open_zip(name: str, data: bytes, what: str) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError) as error:
        raise IngestError(f"{name}: is not a valid {what}") from error


def _inflate(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int, name: str) -> bytes:
    """Unpacks one member, counting the bytes actually produced: the sizes a zip header declares can lie."""
    return b"".join(unpacked_chunks(archive, info, limit, name))


def unpacked_chunks(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int, name: str) -> Iterator[bytes]:
    if info.flag_bits & 0x1:
        raise IngestError(f"{name}: '{info.filename}' is password-protected")
    size = 0
    try:
        with archive.open(info) as member:
            while chunk := member.read(_CHUNK_BYTES):
                size += len(chunk)
                if size > limit:
                    raise IngestError(
                        f"{name}: unpacks to more than {limit:,} bytes, the limit (refused: too large, or a zip bomb)"
                    )
                yield chunk
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, OSError) as error:
        raise IngestError(f"{name}: '{info.filename}' is damaged or uses unsupported compression") from error


def check_unpacked_size(name: str, data: bytes, limit: int, what: str) -> None:
    """xlsx and docx files are zips too: refuse one that would unpack to more than the limit (one chunk in memory
    at a time)."""
    with open_zip(name, data, what) as archive:
        for info in archive.infolist():
            limit -= sum(len(chunk) for chunk in unpacked_chunks(archive, info, limit, name))


def regular_file(path: Path) -> Path:
    """The path of a file to read, or IngestError saying what it is instead: missing, a folder, a device (/dev/zero),
    a pipe or a socket, or a file this process may not read."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise IngestError(f"{path}: file not found") from None
    except OSError as error:
        raise IngestError(f"{path}: cannot be read ({error.strerror or error})") from None
    if stat.S_ISDIR(mode):
        raise IngestError(f"{path}: is a folder, not a file; name the files in it, or a ZIP of them")
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        raise IngestError(f"{path}: is a device, not a file")
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        raise IngestError(f"{path}: is a pipe or a socket, not a file; save what it gives to a file first")
    if not os.access(path, os.R_OK):
        raise IngestError(f"{path}: cannot be read (permission denied)")
    return path


def check_extension(name: str) -> None:
    if extension(name) not in SUPPORTED_EXTENSIONS:
        raise IngestError(f"{name}: unsupported file type; supported: {', '.join(SUPPORTED_EXTENSIONS)}")


def check_file_size(name: str, size: int, config: IngestConfig) -> None:
    if size > config.max_file_bytes:
        raise IngestError(f"{name}: {size:,} bytes is more than the {config.max_file_bytes:,}-byte limit per file")


def check_total_size(total: int, config: IngestConfig) -> None:
    if total > config.max_total_bytes:
        raise IngestError(f"the files add up to {total:,} bytes, more than the {config.max_total_bytes:,}-byte limit")


def extension(name: str) -> str:
    return PurePosixPath(name).suffix.lower()


def _is_zip(name: str) -> bool:
    return extension(name) == ".zip"
