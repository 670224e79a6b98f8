"""Mean and spread of a set of vectors accumulated a slice at a time, for data too large to hold at once."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

MIN_RELATIVE_VARIANCE = 1e-10
"""Vectors whose variance around their mean is below this share of their mean squared norm are treated as
identical: float32 rounding alone leaves about 1e-14, and an FVU divided by it would read 1e12."""


@dataclass
class Moments:
    """Count, mean, summed squared deviation from the mean and summed squared norm of the rows added so far
    (float64; slices merge exactly, Chan et al.'s pairwise update)."""

    dim: int
    count: int = 0
    mean: np.ndarray = field(init=False)
    squared_deviation: float = 0.0
    """Sum over rows of |x - mean|^2: the total variance around the mean, times count."""
    squared_norm: float = 0.0
    """Sum over rows of |x|^2."""

    def __post_init__(self) -> None:
        self.mean = np.zeros(self.dim)

    @classmethod
    def of(cls, x: np.ndarray) -> Moments:
        moments = cls(x.shape[1])
        moments.add(x)
        return moments

    def add(self, x: np.ndarray) -> None:
        """Adds the rows of x [m, d]."""
        if len(x):
            x = x.astype(np.float64)
            mean = x.mean(axis=0)
            self._combine(len(x), mean, float(np.sum((x - mean) ** 2)), float(np.sum(np.sum(x**2, axis=1))))

    def merged(self, other: Moments) -> Moments:
        """The moments of both sets of rows together."""
        both = Moments(self.dim)
        for part in (self, other):
            both._combine(part.count, part.mean, part.squared_deviation, part.squared_norm)
        return both

    def _combine(self, count: int, mean: np.ndarray, squared_deviation: float, squared_norm: float) -> None:
        if not count:
            return
        delta = mean - self.mean
        total = self.count + count
        self.squared_deviation += squared_deviation + float(delta @ delta) * self.count * count / total
        self.mean = self.mean + delta * count / total
        self.squared_norm += squared_norm
        self.count = total

    def has_variance(self) -> bool:
        """Whether the rows differ by more than float rounding (see MIN_RELATIVE_VARIANCE)."""
        if not self.count:
            return False
        mean_squared_norm = max(self.squared_norm / self.count, np.finfo(np.float64).tiny)
        return self.squared_deviation / self.count > MIN_RELATIVE_VARIANCE * mean_squared_norm
