"""How long a planned label batch will take: a range from a GPU to a small model on a laptop CPU, and the pace of
the last batch when one was measured, in seconds and in the plain words a page or the command line shows."""

from collections.abc import Iterable
from dataclasses import dataclass

from prisma_core.pipeline.labelling.job import LabelSummary
from prisma_core.pipeline.labelling.planning import LabelPlan

CPU_TOKENS_PER_S = 150
"""Prompt tokens a 3B model reads per second on a laptop CPU (a GPU reads ten times more)."""
GPU_SPEEDUP = 10
"""How many times faster a GPU reads prompt tokens."""
SECONDS_PER_ANSWER = 3
"""Seconds a small model on a laptop CPU takes to write one answer (a GPU writes three times faster)."""
GPU_ANSWER_SPEEDUP = 3


@dataclass(frozen=True)
class TimeEstimate:
    gpu_seconds: float  # roughly, on a GPU
    cpu_seconds: float  # roughly, a small model on a laptop CPU
    measured_seconds: float | None = None  # at the pace of the last batch, when one was measured


@dataclass(frozen=True)
class PlanText:
    """What a plan asks and how long it takes, in plain sentences: `requests` ("12 requests") is empty when there is
    nothing to do, so a page can emphasise it apart from the `details` that follow it."""

    requests: str
    details: str


def estimate_time(plan: LabelPlan, seconds_per_request: float | None = None) -> TimeEstimate:
    """Seconds the plan's requests take: answers written plus prompt tokens read, on a GPU and on a laptop CPU; and
    at `seconds_per_request` (a measured pace) when given."""
    answers = plan.n_requests * SECONDS_PER_ANSWER
    gpu = answers / GPU_ANSWER_SPEEDUP + plan.prompt_tokens / (CPU_TOKENS_PER_S * GPU_SPEEDUP)
    cpu = answers + plan.prompt_tokens / CPU_TOKENS_PER_S
    measured = plan.n_requests * seconds_per_request if seconds_per_request else None
    return TimeEstimate(gpu, cpu, measured)


def describe_plan(plan: LabelPlan, seconds_per_request: float | None = None) -> PlanText:
    """The plan's requests, tokens, time (`estimate_time`) and skipped units, in sentences; or that there is
    nothing to do."""
    if not plan.n_requests:
        return PlanText("", "Nothing to do: everything chosen already has a label from this model.")
    time = estimate_time(plan, seconds_per_request)
    details = (
        f"({counted(plan.n_features, 'feature')}, {counted(plan.n_families, 'family', 'families')}, "
        f"{counted(plan.n_themes, 'theme')}, {counted(plan.n_subthemes, 'sub-theme')}), about "
        f"{plan.prompt_tokens:,} tokens for the model to read: roughly "
        f"{minutes(time.gpu_seconds)} on a GPU, {minutes(time.cpu_seconds)} for a small model on a laptop CPU."
    )
    if time.measured_seconds is not None:
        pace = f"{seconds_per_request:.1f} s a request"
        details += f" At the pace of the last batch ({pace}): {minutes(time.measured_seconds)}."
    skipped = plan.n_features_skipped + plan.n_families_skipped + plan.n_themes_skipped + plan.n_subthemes_skipped
    if skipped:
        details += f" {skipped:,} already labelled by this model are skipped."
    return PlanText(counted(plan.n_requests, "request"), details)


def measured_pace(seconds: float, summaries: Iterable[LabelSummary]) -> float | None:
    """The pace of a batch that ran `seconds`: per request answered or failed (None when none was)."""
    done = sum(summary.n_labelled + summary.n_failed for summary in summaries)
    return seconds / done if done else None


def counted(n: int, word: str, plural: str = "") -> str:
    """The count and the word: 1 feature, 2 features, 1,200 families (`plural` when adding an s is wrong)."""
    return f"{n:,} {word if n == 1 else plural or word + 's'}"


def minutes(seconds: float) -> str:
    """Seconds under 90 s, else whole minutes."""
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"
