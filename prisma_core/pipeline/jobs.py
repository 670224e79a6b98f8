"""Long work (embedding, training, the demo) in background threads that outlive reruns and page switches.

One `JobRegistry` per process (the app keeps it in `st.cache_resource`). A job is keyed by what it works on, so a
second click, from this session or another, finds the running job instead of starting a duplicate. The job only
calls the core, which stores its results; the pages read them back from the store.

Every job can be cancelled. Work that checks `should_stop` itself (labelling, which then returns a summary of what
it kept; training) is started with `stop_aware=True` and gets `work(progress, should_stop)`. Any other work gets
`work(progress)`, and after a cancel its next progress report raises `JobCancelled`, which unwinds the stage
(the core stores results last, so a cancelled embedding or demo leaves nothing half-written).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from prisma_core.embed import release_models
from prisma_core.errors import PrismaError
from prisma_core.memory import drop_code_pages, release_unused_memory
from prisma_core.progress import Progress

JOB_NICENESS = 10
"""How much lower than the pages' script runs a job's thread is scheduled (Linux niceness, +10): on a 2-core host a
job (a map's t-SNE, training) would otherwise take the CPU from the page an analyst is waiting for; threads the job
starts (OpenMP, OpenVINO workers) inherit it."""
MAX_HISTORY = 2_000
"""Metric points kept per job for the live chart (the trainer reports about 100 per run)."""
JOB_LIBRARIES = ("torch", "openvino", "tokenizers")
"""Packages whose native code only jobs run (training, embedding): let go of between jobs (`drop_code_pages`)."""

Status = Literal["running", "done", "failed", "cancelled"]


class JobCancelled(PrismaError):
    """Raised inside a job's thread, at its next progress report, once the analyst asked to cancel it."""


@dataclass
class Job:
    key: str
    title: str
    job_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    started: float = field(default_factory=time.time)
    finished: float | None = None
    progress: Progress | None = None
    stages: list[str] = field(default_factory=list)
    """Stages in the order they first reported progress."""
    history: list[dict[str, float]] = field(default_factory=list)
    """One point per progress report that carried metrics: step plus the metrics (loss, fvu, dead_fraction...)."""
    result: Any = None
    error: BaseException | None = None
    stop_aware: bool = False
    """The work checks `should_stop` itself, so progress reports never raise."""
    _cancel: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def status(self) -> Status:
        if self.finished is None:
            return "running"
        if self.cancel_requested:
            return "cancelled"
        return "failed" if self.error is not None else "done"

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    def cancel(self) -> None:
        """Ask the work to stop at its next check; what it already stored stays."""
        self._cancel.set()

    def should_stop(self) -> bool:
        """The `should_stop` handed to stop-aware work."""
        return self._cancel.is_set()

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def seconds(self) -> float:
        return (self.finished or time.time()) - self.started

    @property
    def error_message(self) -> str:
        """What went wrong, for the analyst: core errors carry their own advice; anything else is named."""
        if self.error is None:
            return ""
        if isinstance(self.error, PrismaError):
            return str(self.error)
        return f"Unexpected error ({type(self.error).__name__}): {self.error}"

    def report(self, event: Progress) -> None:
        """The progress callback handed to the core (called from the job's thread)."""
        if self._cancel.is_set() and not self.stop_aware:
            raise JobCancelled(f"{self.title} was cancelled; nothing half-done was kept.")
        if event.stage not in self.stages:
            self.stages.append(event.stage)
        self.progress = event
        if event.metrics and len(self.history) < MAX_HISTORY:
            self.history.append({"step": float(event.done), **event.metrics})


class JobRegistry:
    """Process-wide: at most one running job per key; finished jobs stay until replaced, for their result."""

    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()

    def start(self, key: str, title: str, work: Callable[..., Any], stop_aware: bool = False) -> tuple[Job, bool]:
        """Run `work(progress)` (with `stop_aware`: `work(progress, should_stop)`) in a daemon thread unless a job
        with this key is running.

        Returns (the job, whether it was started now).
        """
        with self._lock:
            current = self._jobs.get(key)
            if current is not None and current.running:
                return current, False
            job = self._jobs[key] = Job(key, title, stop_aware=stop_aware)
        threading.Thread(target=self._run, args=(job, work), name=f"prisma-{key}", daemon=True).start()
        return job, True

    def get(self, key: str) -> Job | None:
        return self._jobs.get(key)

    def cancel(self, key: str) -> Job | None:
        """Ask the running job with this key to stop; returns it (None when nothing runs under the key)."""
        job = self.get(key)
        if job is None or not job.running:
            return None
        job.cancel()
        return job

    def running(self) -> list[Job]:
        return [job for job in list(self._jobs.values()) if job.running]

    def wait(self, key: str, timeout: float) -> Job | None:
        """Block until the job with this key has finished (or the timeout passes); for tests and scripts."""
        deadline = time.time() + timeout
        while (job := self.get(key)) is not None and job.running and time.time() < deadline:
            time.sleep(0.1)
        return job

    def _run(self, job: Job, work: Callable[..., Any]) -> None:
        yield_to_pages()
        try:
            job.result = work(job.report, job.should_stop) if job.stop_aware else work(job.report)
        except BaseException as error:  # the thread must record every failure; the page shows it
            job.error = error
        finally:
            if self.running() == [job]:  # the last job: the embedding model is not needed until the next one
                release_models()
                drop_code_pages(JOB_LIBRARIES)  # nor torch's and OpenVINO's code, read back when a job needs it
            release_unused_memory()  # the job's freed working memory would otherwise stay resident
            job.finished = time.time()


def yield_to_pages() -> None:
    """Schedule the calling thread JOB_NICENESS lower. Linux only: there a thread has its own niceness (elsewhere
    setpriority would lower the whole server)."""
    if sys.platform != "linux":
        return
    thread = threading.get_native_id()
    with contextlib.suppress(OSError):  # a host that forbids it: the job runs at the server's priority
        os.setpriority(os.PRIO_PROCESS, thread, min(os.getpriority(os.PRIO_PROCESS, thread) + JOB_NICENESS, 19))
