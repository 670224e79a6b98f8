"""Progress reporting shared by every long stage: the core calls back, the UI or CLI renders."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Progress:
    stage: str
    done: int
    total: int
    message: str = ""
    metrics: Mapping[str, float] = field(default_factory=dict)

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total else 1.0


ProgressCallback = Callable[[Progress], None]


def ignore_progress(_: Progress) -> None:
    """Default callback for callers that do not show progress."""
