"""Running a label batch: its settings, its summary, and the progress, cancellation and failure streak it shares.

A batch reports progress, stops when `should_stop()` turns true, and returns a summary with counts and the errors
met. After `max_consecutive_failures` failures in a row it stops: the server is gone or too slow, or the model
cannot do the task, and carrying on would only wait out more timeouts.

What a batch makes (labels, detection scores) is stored a few at a time (`Pending`): one commit per label made a
table's history, and what LanceDB caches of it in the process, grow with the square of the labels (354 features
took a server from 504 to 1,019 MB; a labelled run's interpretations table reached 114 MB for 3,737 rows).
"""

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Generic, TypeVar

import numpy as np

from prisma_core.config_docs import CheckedConfig, setting
from prisma_core.interpret.label_choice import CHANCE
from prisma_core.names import LEVEL_WORDS
from prisma_core.progress import Progress, ProgressCallback
from prisma_core.store import Workspace

StopCheck = Callable[[], bool]
Made = TypeVar("Made")

SAVE_EVERY = 25
"""Results of a batch (labels, scores) stored in one commit; fewer when SAVE_SECONDS pass first, and at the end."""
SAVE_SECONDS = 30.0
"""A result waits at most about this long to be stored, so a slow model's labels still show up as they come."""


def never_stop() -> bool:
    """Default `should_stop` for callers that do not cancel."""
    return False


def shown_texts(workspace: Workspace, dataset_id: str, shown: Iterable[tuple[np.ndarray, ...]]) -> dict[int, str]:
    """position -> text of the documents a batch shows the model (`shown`: each unit's arrays of positions), reading
    only those rows: labelling holds those texts, never the whole dataset's."""
    parts = [np.asarray(positions, np.int64) for unit in shown for positions in unit]
    positions = np.unique(np.concatenate(parts)) if parts else np.empty(0, np.int64)
    if not len(positions):
        return {}
    found = workspace.documents_at(dataset_id, positions, ["position", "text"])
    return dict(zip(found["position"].tolist(), found["text"], strict=True))


@dataclass(frozen=True)
class LabelConfig(CheckedConfig):
    settings_name = "labelling"

    relabel: bool = setting(False, doc="Label again what this model and prompt version already labelled.")
    max_consecutive_failures: int = setting(
        3, minimum=1, maximum=1_000, doc="Stop after this many failed features (or families) in a row."
    )
    max_family_children: int = setting(
        20, minimum=0, maximum=1_000, doc="Child labels sent to label a family: its first (closest) children."
    )
    seed: int = setting(0, minimum=0, maximum=2**31 - 1, doc="Seeds the contrast documents (with the feature id).")


@dataclass(frozen=True)
class SetAside:
    """A model's name for a family, theme or sub-theme that scored worse than the name it had, which stays shown."""

    kind: str  # "family", "theme", "subtheme"
    group_id: int
    label: str  # the model's name, not shown
    score: float  # its embedding score
    kept: str  # the name kept
    kept_score: float

    def sentence(self) -> str:
        """E.g. "Theme 3 keeps “heart · valve” (0.89): the model's “group” scored 0.45, no better than chance."."""
        chance = ", no better than chance" if self.score <= CHANCE else ""
        return (
            f"{LEVEL_WORDS[self.kind]} {self.group_id} keeps “{self.kept}” ({self.kept_score:.2f}): the model's "
            f"“{self.label}” scored {self.score:.2f}{chance}."
        )


@dataclass(frozen=True)
class LabelSummary:
    model: str
    host: str
    n_labelled: int
    n_skipped: int  # already labelled by this model and prompt version
    n_inactive: int  # nothing to name them from: selected features that fire on no document, themes or sub-themes
    # that hold no feature of their own
    n_failed: int
    n_remaining: int  # never tried: the batch was cancelled or gave up
    errors: list[str] = field(default_factory=list)  # one per failure, naming the feature or family
    stop_reason: str = ""  # why the batch ended early; "" when it went through
    set_aside: list[SetAside] = field(default_factory=list)  # group names not shown: they scored worse

    @property
    def first_error(self) -> str:
        return self.errors[0] if self.errors else ""

    def not_asked(self, level: str) -> str:
        """The units of `level` ("features", "families", ...) the model was not asked about for want of anything to
        name them from, in words ("" for none)."""
        n, one = self.n_inactive, self.n_inactive == 1
        if not n:
            return ""
        if level == "features":
            return f"{n:,} {'never fires' if one else 'never fire'}"
        own, names = ("its", "name") if one else ("their", "names")
        return f"{n:,} without a feature of {own} own to be named from (keyword {names} kept)"


class Batch:
    """Progress, cancellation and the failure streak shared by the labelling and detection loops."""

    def __init__(
        self,
        stage: str,
        total: int,
        max_consecutive_failures: int,
        progress: ProgressCallback,
        should_stop: StopCheck,
    ):
        self.stage, self.total = stage, total
        self.max_consecutive_failures = max_consecutive_failures
        self.progress, self.should_stop = progress, should_stop
        self.n_done = self.n_failed = self.streak = 0
        self.errors: list[str] = []
        self.stop_reason = ""
        progress(Progress(stage, 0, total))

    @property
    def n_tried(self) -> int:
        return self.n_done + self.n_failed

    def keep_going(self) -> bool:
        if self.stop_reason:
            return False
        if self.should_stop():
            self.stop_reason = f"Cancelled after {self.n_tried} of {self.total}; everything done so far is kept."
        elif self.streak >= self.max_consecutive_failures:
            self.stop_reason = (
                f"Stopped after {self.streak} failures in a row; the last one: {self.errors[-1]} "
                "Everything done so far is kept: run again to resume."
            )
        return not self.stop_reason

    def succeeded(self, message: str) -> None:
        self.n_done += 1
        self.streak = 0
        self.progress(Progress(self.stage, self.n_tried, self.total, message))

    def failed(self, error: str) -> None:
        self.n_failed += 1
        self.streak += 1
        self.errors.append(error)
        self.progress(Progress(self.stage, self.n_tried, self.total, error))

    def summary(self, model: str, host: str, n_skipped: int, n_inactive: int = 0) -> LabelSummary:
        return LabelSummary(
            model=model,
            host=host,
            n_labelled=self.n_done,
            n_skipped=n_skipped,
            n_inactive=n_inactive,
            n_failed=self.n_failed,
            n_remaining=self.total - self.n_tried,
            errors=self.errors,
            stop_reason=self.stop_reason,
        )


class Pending(Generic[Made]):
    """What a batch made and has not stored yet: `write(made)` stores it in one commit every SAVE_EVERY results or
    SAVE_SECONDS, and once more when the `with` block ends, however it ends (a cancel, failures in a row, an error).
    A hard kill loses at most what was not written yet; a rerun resumes from what was."""

    def __init__(self, write: Callable[[list[Made]], None]) -> None:
        self._write = write
        self._made: list[Made] = []
        self._since = time.monotonic()

    def add(self, made: Made) -> None:
        if not self._made:
            self._since = time.monotonic()
        self._made.append(made)
        if len(self._made) >= SAVE_EVERY or time.monotonic() - self._since >= SAVE_SECONDS:
            self.flush()

    def flush(self) -> None:
        if self._made:
            made, self._made = self._made, []
            self._write(made)

    def __enter__(self) -> "Pending[Made]":
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.flush()
