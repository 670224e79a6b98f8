"""Give freed memory back to the operating system after long work.

glibc's malloc keeps the pages a long job freed (embedding batches, training tensors) in its heaps for reuse, so a
server's resident memory stays near its peak long after the job ended: measured +240 MB kept after embedding 150
BBC articles, +95 MB once trimmed. Hosts with a memory cap (about 1 GB on Streamlit Community
Cloud) count what is resident, so the app trims after every job.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools


@functools.cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    libc = ctypes.CDLL(name)
    return libc if hasattr(libc, "malloc_trim") else None  # glibc only (not musl, macOS or Windows)


def release_unused_memory() -> bool:
    """Return the C heap's free pages to the operating system; True when glibc did (False elsewhere: no-op)."""
    libc = _libc()
    return bool(libc is not None and libc.malloc_trim(0))
