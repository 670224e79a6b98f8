"""How long a planned label batch takes, in seconds and in the sentences the Labels page shows."""

import pytest

from prisma_core.pipeline.labelling import LabelPlan, LabelSummary
from prisma_core.pipeline.labelling.estimate import (
    counted,
    describe_plan,
    estimate_time,
    measured_pace,
    minutes,
)


def plan(n_features: int = 0, n_families: int = 0, n_themes: int = 0, prompt_tokens: int = 0, **skipped) -> LabelPlan:
    counts = {"n_features_skipped": 0, "n_inactive": 0, "n_families_skipped": 0} | skipped
    return LabelPlan(
        n_features=n_features,
        n_families=n_families,
        n_themes=n_themes,
        prompt_tokens=prompt_tokens,
        **counts,
    )


def summary(n_labelled: int, n_failed: int) -> LabelSummary:
    return LabelSummary("llama3.2", "http://localhost:11434", n_labelled, 0, 0, n_failed, 0)


def test_the_time_is_answers_written_plus_tokens_read_on_a_cpu_and_a_gpu() -> None:
    # 20 requests: 3 s an answer on a CPU (1 s on a GPU); 30,000 tokens read at 150 a second (1,500 on a GPU)
    estimate = estimate_time(plan(n_features=20, prompt_tokens=30_000))
    assert estimate.cpu_seconds == pytest.approx(20 * 3 + 200)
    assert estimate.gpu_seconds == pytest.approx(20 * 1 + 20)
    assert estimate.measured_seconds is None


def test_a_measured_pace_gives_the_plan_at_that_pace() -> None:
    assert estimate_time(plan(n_features=30, n_families=10), 4.5).measured_seconds == pytest.approx(180)


def test_a_plan_of_n_requests_at_s_seconds_each_says_its_minutes() -> None:
    text = describe_plan(plan(n_features=100, n_families=1, n_themes=19, n_subthemes=30, prompt_tokens=0), 6.0)
    assert text.requests == "150 requests"
    assert text.details.startswith(
        "(100 features, 1 family, 19 themes, 30 sub-themes), about 0 tokens for the model to read"
    )
    assert "roughly 2 min on a GPU, 8 min for a small model on a laptop CPU." in text.details
    assert text.details.endswith("At the pace of the last batch (6.0 s a request): 15 min.")


def test_the_sentence_counts_what_is_skipped_and_says_when_there_is_nothing_to_do() -> None:
    some = describe_plan(plan(n_features=1, n_features_skipped=4, n_families_skipped=2))
    assert some.requests == "1 request" and some.details.endswith("6 already labelled by this model are skipped.")
    assert "pace" not in some.details
    nothing = describe_plan(plan(n_features_skipped=4))
    assert nothing.requests == "" and nothing.details.startswith("Nothing to do")


def test_the_pace_of_a_batch_counts_its_failures_as_requests_too() -> None:
    assert measured_pace(60.0, [summary(8, 2), summary(4, 1)]) == pytest.approx(4.0)
    assert measured_pace(60.0, [summary(0, 0)]) is None


def test_durations_read_in_seconds_then_minutes_and_counts_agree_with_their_number() -> None:
    assert [minutes(s) for s in (0, 89, 90, 600)] == ["0 s", "89 s", "2 min", "10 min"]
    assert counted(1, "family", "families") == "1 family"
    assert counted(1_200, "family", "families") == "1,200 families"
    assert counted(2, "request") == "2 requests"
