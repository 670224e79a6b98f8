"""prisma_core.memory: freed C-heap pages go back to the operating system, and threads share a few heaps."""

import os
import subprocess
import sys
from pathlib import Path

from prisma_core.memory import MALLOC_ARENAS, drop_code_pages, drop_file_pages, release_unused_memory


def resident_mb(field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{os.getpid()}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} in /proc status")


def test_pages_of_a_mapped_file_are_let_go_and_read_again_unchanged(tmp_path) -> None:
    import mmap

    weights = tmp_path / "model.bin"
    content = os.urandom(32 * 1024 * 1024)
    weights.write_bytes(content)
    with weights.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        assert mapped[:] == content  # every page read once: resident
        held = resident_mb("RssFile")
        assert drop_file_pages(weights) == len(content)
        assert resident_mb("RssFile") < held - 28
        assert mapped[:] == content  # read again from the file
        assert drop_file_pages(tmp_path / "not_mapped.bin") == 0


def resident_code_kb(folder: str) -> int:
    """Resident KB of this process's executable mappings of files under `folder`."""
    total, mapped = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:  # a mapping's header line
            mapped = len(fields) == 6 and fields[1] == "r-xp" and fields[5].startswith(folder)
        elif mapped and fields[0] == "Rss:":
            total += int(fields[1])
    return total


def test_the_code_of_a_library_used_only_by_jobs_is_let_go_and_runs_again() -> None:
    import numpy as np

    folder = str(Path(np.__path__[0]).resolve())
    expected = float(np.linalg.norm(np.arange(1_000.0)))  # numpy's code runs: resident
    held = resident_code_kb(folder)
    assert held > 1_000
    assert drop_code_pages(["numpy", "a_package_never_imported"]) > 0
    assert resident_code_kb(folder) < held / 2
    assert float(np.linalg.norm(np.arange(1_000.0))) == expected  # its code read back from the files
    assert drop_code_pages(["a_package_never_imported"]) == 0


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


HEAPS_AFTER_EIGHT_THREADS = """
import ctypes, ctypes.util, os, re, sys, tempfile, threading
if sys.argv[1] == "store":
    import prisma_core.store  # noqa: F401
libc = ctypes.CDLL(ctypes.util.find_library("c"))
barrier = threading.Barrier(8)

def allocate():
    barrier.wait()  # all eight threads allocate at once, so glibc would give each its own heap
    blocks = [os.urandom(4096) for _ in range(2_000)]
    barrier.wait()

threads = [threading.Thread(target=allocate) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
report = tempfile.mktemp()
libc.fopen.restype = ctypes.c_void_p
stream = libc.fopen(report.encode(), b"w")
libc.malloc_info(0, ctypes.c_void_p(stream))
libc.fclose(ctypes.c_void_p(stream))
print(len(re.findall(r"<heap nr=", open(report).read())))
"""


def heaps_after_eight_threads(*args: str) -> int:
    """How many glibc heaps a fresh process has after eight threads allocated at the same moment."""
    environment = {name: value for name, value in os.environ.items() if name != "MALLOC_ARENA_MAX"}
    done = subprocess.run(
        [sys.executable, "-c", HEAPS_AFTER_EIGHT_THREADS, *args],
        capture_output=True,
        text=True,
        env=environment,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip())


def test_the_store_caps_the_heaps_that_threads_grow() -> None:
    """A server's threads (sessions, jobs, OpenVINO's workers) each grow a heap of their own, whose freed pages no other
    thread reuses; once the store is imported they share MALLOC_ARENAS heaps."""
    assert heaps_after_eight_threads("plain") > MALLOC_ARENAS
    assert heaps_after_eight_threads("store") <= MALLOC_ARENAS
