"""Give freed memory back to the operating system after long work.

glibc's malloc keeps the pages a long job freed (embedding batches, training tensors) in its heaps for reuse, so a
server's resident memory stays near its peak long after the job ended: measured +240 MB kept after embedding 150
BBC articles, +95 MB once trimmed. Hosts with a memory cap (about 1 GB on Streamlit Community
Cloud) count what is resident, so the app trims after every job.

Arrow (Parquet reads, tables handed to and from LanceDB) allocates through its own mimalloc pool by default, which
keeps what it freed for Arrow alone: 67-80 MB stayed resident after reading the demo corpus and creating its
dataset, unusable by numpy or torch and out of malloc_trim's reach. The store puts Arrow on the C heap
(`share_arrow_memory`), where freed pages serve the next allocation of any library.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

MALLOC_ARENAS = 2
"""glibc gives threads their own heaps (up to 8 per core), and a page freed in one heap serves only that heap: a
server's sessions, jobs and OpenVINO's worker threads each grow their own. Two heaps: the 400-note demo in one
process peaked at 994 MB instead of 1,058 (972 with MALLOC_ARENA_MAX=2 set before the process starts, which also
covers threads started before the store is imported), embedding as fast (BENCHMARKS.md, section 8)."""
_M_ARENA_MAX = -8  # mallopt's parameter number, from glibc's malloc.h
_MADV_DONTNEED = 4  # madvise's advice number, from Linux's mman.h


@functools.cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    libc = ctypes.CDLL(name)
    return libc if hasattr(libc, "malloc_trim") else None  # glibc only (not musl, macOS or Windows)


def share_arrow_memory() -> None:
    """Arrow allocates from the C heap (malloc) from now on, instead of its own pool."""
    import pyarrow

    pyarrow.set_memory_pool(pyarrow.system_memory_pool())


def limit_malloc_heaps() -> None:
    """glibc keeps at most MALLOC_ARENAS heaps for the threads started from now on (see there)."""
    libc = _libc()
    if libc is not None and "MALLOC_ARENA_MAX" not in os.environ:  # a setting made for the process wins
        libc.mallopt(_M_ARENA_MAX, MALLOC_ARENAS)


def release_unused_memory() -> bool:
    """Return the C heap's free pages to the operating system; True when glibc did (False elsewhere: no-op)."""
    libc = _libc()
    return bool(libc is not None and libc.malloc_trim(0))


def drop_file_pages(path: Path) -> int:
    """Let go of this process's resident pages of `path` where it is mapped read-only; bytes advised (0 off Linux).

    A library that maps a file (OpenVINO its model's weights) reads all of it once while it prepares, and those
    pages stay resident, counted in the process's memory, though most are never read again. Read-only pages of a
    file are only a copy of it: the next read of one brings it back from the file, so nothing is lost."""
    target = str(path.resolve())
    return _advise_mapped(lambda file, permissions: file == target and "w" not in permissions)


def drop_code_pages(packages: Sequence[str]) -> int:
    """Let go of the resident machine code of the imported `packages`' native libraries (their executable mappings);
    bytes advised. Code is never written, so each page is a copy of the library file, read back on its next use.

    torch's libraries hold about 100 MB of code once a training ran, OpenVINO's about 40 MB once a model ran: both
    only run inside jobs, yet stay resident between them (measured: BENCHMARKS.md section 8)."""
    folders = [
        str(Path(folder).resolve()) + os.sep
        for name in packages
        if (module := sys.modules.get(name)) is not None
        for folder in getattr(module, "__path__", [])
    ]
    if not folders:
        return 0
    return _advise_mapped(lambda file, permissions: permissions == "r-xp" and file.startswith(tuple(folders)))


def _advise_mapped(chosen: Callable[[str, str], bool]) -> int:
    """madvise(DONTNEED) on every mapping of this process that `chosen(file, permissions)` picks; bytes advised."""
    libc, maps = _libc(), Path("/proc/self/maps")
    if libc is None or not maps.exists():
        return 0
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    advised = 0
    for line in maps.read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and chosen(fields[5], fields[1]):
            start, end = (int(bound, 16) for bound in fields[0].split("-"))
            if libc.madvise(start, end - start, _MADV_DONTNEED) == 0:
                advised += end - start
    return advised
