"""Resident memory of a process and all its descendants (Linux /proc), sampled in a thread with a peak per named
phase: what a memory-capped host such as Streamlit Community Cloud counts. Used by the app memory benchmarks."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SAMPLE_S = 0.2


def status_mb(pid: int, field: str) -> float:
    """A memory line of /proc/<pid>/status (VmRSS, VmHWM), in MB; 0 when the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    except (OSError, ProcessLookupError):
        pass
    return 0.0


def process_tree(pid: int) -> list[int]:
    """pid and all its descendants."""
    tree, pending = [], [pid]
    while pending:
        current = pending.pop()
        tree.append(current)
        for children in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                pending += [int(child) for child in children.read_text().split()]
            except OSError:  # the thread or process ended meanwhile
                continue
    return tree


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and all its descendants, summed, in MB."""
    return sum(status_mb(member, "VmRSS") for member in process_tree(pid))


class TreeSampler:
    """Samples tree_rss_mb(pid) every `interval` seconds in a thread, keeping the peak of each named phase."""

    def __init__(self, pid: int, interval: float = SAMPLE_S, limit_mb: float | None = None) -> None:
        self.pid, self.interval, self.limit_mb = pid, interval, limit_mb
        self.phase = "start"
        self.peaks: dict[str, float] = {}
        self.ends: dict[str, float] = {}
        self.seconds: dict[str, float] = {}
        self.killed_at_mb: float | None = None
        self.notes: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def sample(self) -> float:
        rss = tree_rss_mb(self.pid)
        self.peaks[self.phase] = max(self.peaks.get(self.phase, 0.0), rss)
        if self.limit_mb is not None and rss > self.limit_mb and self.killed_at_mb is None:
            self.killed_at_mb = rss  # protects the machine: the server and its children are stopped
            for member in process_tree(self.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(member, signal.SIGKILL)
        return rss

    @contextmanager
    def running(self) -> Iterator[None]:
        self._thread.start()
        try:
            yield
        finally:
            self._stop.set()
            self._thread.join()

    @contextmanager
    def during(self, phase: str) -> Iterator[None]:
        """Samples taken inside belong to `phase`; its resident memory at the end is kept too."""
        self.phase = phase
        start = time.perf_counter()
        yield
        self.seconds[phase] = time.perf_counter() - start
        self.ends[phase] = self.sample()

    def report(self) -> dict[str, Any]:
        return {
            "phases": [
                {"phase": p, "peak_mb": self.peaks[p], "end_mb": self.ends.get(p), "seconds": self.seconds.get(p)}
                for p in self.peaks
            ],
            "killed_at_mb": self.killed_at_mb,
            "peak_mb": max(self.peaks.values()),
            "server_vm_hwm_mb": status_mb(self.pid, "VmHWM"),
        }
