"""prisma_core.memory: freed C-heap pages go back to the operating system."""

import os
from pathlib import Path

from prisma_core.memory import release_unused_memory


def resident_mb() -> float:
    for line in Path(f"/proc/{os.getpid()}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc status")


def test_freed_heap_memory_is_returned_to_the_system() -> None:
    blocks = [os.urandom(4096) for _ in range(50_000)]  # 200 MB of malloc'd blocks (too big for Python's allocator)
    last = blocks[-1]  # keeps the top of the heap in use, so free() alone cannot shrink it
    del blocks
    held = resident_mb()
    assert release_unused_memory()
    assert resident_mb() < held - 150
    assert len(last) == 4096


def test_the_store_puts_arrow_on_the_c_heap_where_trimming_returns_its_freed_buffers() -> None:
    import pyarrow

    import prisma_core.store  # noqa: F401  (importing the store is what switches the pool)

    assert pyarrow.default_memory_pool().backend_name == "system"
    table = pyarrow.array(range(25_000_000), type=pyarrow.int64())  # 200 MB through Arrow's allocator
    held = resident_mb()
    del table
    release_unused_memory()
    assert resident_mb() < held - 150
