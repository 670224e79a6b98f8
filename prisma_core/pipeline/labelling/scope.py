"""A labelling job over a scope: features first, then families, then themes, as the Labels page and the `label`
command run it. Families and themes are named from their members' labels, so they come after the features; once
a level stops early (cancelled, failures in a row) the later levels are not started."""

from collections.abc import Sequence
from dataclasses import dataclass, replace

from prisma_core.interpret.labeller import Labeller
from prisma_core.pipeline.labelling.features import label_run
from prisma_core.pipeline.labelling.groups import label_groups
from prisma_core.pipeline.labelling.job import LabelConfig, LabelSummary, StopCheck, never_stop
from prisma_core.pipeline.labelling.planning import subthemes_of
from prisma_core.progress import ProgressCallback, ignore_progress
from prisma_core.reading.runs import LoadedRun
from prisma_core.store import Workspace


@dataclass(frozen=True)
class LabelScope:
    """What a job labels, per level: the ids, None for all of the level, () for none of it. The sub-themes of the
    themes chosen are named with them."""

    feature_ids: Sequence[int] | None = None
    family_ids: Sequence[int] | None = ()
    theme_ids: Sequence[int] | None = ()


@dataclass(frozen=True)
class ScopeSummary:
    """A job's summary per level; None for a level it did not start."""

    features: LabelSummary
    families: LabelSummary | None = None
    themes: LabelSummary | None = None
    subthemes: LabelSummary | None = None

    def levels(self) -> list[tuple[str, LabelSummary]]:
        """(level, summary) of every level the job labelled, in the order it labelled them."""
        levels = [
            ("features", self.features),
            ("families", self.families),
            ("themes", self.themes),
            ("sub-themes", self.subthemes),
        ]
        return [(level, summary) for level, summary in levels if summary is not None]

    @property
    def stop_reason(self) -> str:
        """Why the job ended early; "" when every level went through."""
        return next((summary.stop_reason for _, summary in self.levels() if summary.stop_reason), "")


def label_scope(
    workspace: Workspace,
    run: LoadedRun,
    labeller: Labeller,
    config: LabelConfig,
    scope: LabelScope,
    progress: ProgressCallback = ignore_progress,
    should_stop: StopCheck = never_stop,
) -> ScopeSummary:
    """Label the scope's features, then its families, then its themes and their sub-themes (see `label_run` and
    `label_groups`)."""
    summary = ScopeSummary(label_run(workspace, run, labeller, config, scope.feature_ids, progress, should_stop))
    levels = (
        ("families", "family", scope.family_ids),
        ("themes", "theme", scope.theme_ids),
        ("subthemes", "subtheme", subthemes_of(workspace, run, scope.theme_ids)),
    )
    for level, kind, ids in levels:
        if (ids is None or len(ids) > 0) and not summary.stop_reason:
            labelled = label_groups(workspace, run, kind, labeller, config, progress, should_stop, group_ids=ids)
            summary = replace(summary, **{level: labelled})
    return summary
