"""Command line: `python -m prisma_core <stage> ...`. Stage flags are generated from the stage configs.

The stages (`pipeline`, `labelling`) are imported inside the commands that run them, so `--help` or `list` never
import torch or sentence-transformers (tests/core/test_cli.py checks which libraries each command imports)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tqdm import tqdm

from prisma_core.config_docs import field_docs, field_kind, literal_values
from prisma_core.edit_config import CarryConfig, EditConfig
from prisma_core.embed import EmbedConfig
from prisma_core.errors import DamagedTableError, LabellingError, PrismaError, SettingsError
from prisma_core.families import FamilyConfig
from prisma_core.ingest import IngestConfig, guess_id_column, preview_paths
from prisma_core.interpret.label_scores import ScoreConfig
from prisma_core.interpret.labelling.job import LabelConfig, LabelSummary
from prisma_core.interpret.ollama_config import OllamaConfig
from prisma_core.progress import Progress
from prisma_core.report.config import ReportConfig
from prisma_core.run_settings import run_settings
from prisma_core.sae.config import SAEConfig
from prisma_core.store import Workspace
from prisma_core.themes import ThemeConfig

if TYPE_CHECKING:
    from prisma_core.run_quality import Placement

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130
NAME_HELP = "dataset name (default: the first file's name without its extension)"
T = TypeVar("T")


class ProgressBars:
    """One tqdm bar per stage, on stderr."""

    def __init__(self) -> None:
        self.bars: dict[str, tqdm] = {}

    def __call__(self, event: Progress) -> None:
        bar = self.bars.get(event.stage)
        if bar is None or bar.total != event.total:
            if bar is not None:
                bar.close()
            bar = self.bars[event.stage] = tqdm(total=event.total, desc=event.stage, file=sys.stderr, leave=False)
        bar.n = event.done
        postfix = {name: f"{value:.4g}" for name, value in event.metrics.items()}
        bar.set_postfix(postfix or ({"": event.message} if event.message else {}), refresh=True)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()
        self.bars.clear()


# -- flags from configs -----------------------------------------------------------------------------------------


def add_config_flags(
    parser: argparse.ArgumentParser, config_type: type, prefix: str = "", omit: Collection[str] = ()
) -> None:
    """One `--field-name` flag per dataclass field, typed, defaulting to None (= the config's own default); none
    for the fields in `omit` (settings the command does not use)."""
    docs = field_docs(config_type)
    group = parser.add_argument_group(config_type.__name__)
    for field in dataclasses.fields(config_type):
        if field.metadata.get("cli") is False or field.name in omit:
            continue  # e.g. an API key: read from the environment, never typed where shell history keeps it
        flag = "--" + (("" if field.metadata.get("unprefixed_flag") else prefix) + field.name).replace("_", "-")
        kind, choices = field_kind(config_type, field.name), list(literal_values(config_type, field.name)) or None
        shown_default = "" if field.default is dataclasses.MISSING else f" (default: {field.default})"
        help_text = f"{docs[field.name]}{shown_default}".strip().replace("%", "%%")
        if kind is bool:
            group.add_argument(
                flag, dest=prefix + field.name, action=argparse.BooleanOptionalAction, default=None, help=help_text
            )
        else:
            group.add_argument(flag, dest=prefix + field.name, type=kind, choices=choices, default=None, help=help_text)


def config_from_args(config_type: type, args: argparse.Namespace, prefix: str = "", base: Any = None) -> Any:
    """The config from the flags given; fields without a flag keep `base`'s value (or the config's default).

    A setting out of range raises SettingsError (its config's own check)."""
    given = {f.name: getattr(args, prefix + f.name, None) for f in dataclasses.fields(config_type)}
    given = {name: value for name, value in given.items() if value is not None}
    try:
        return dataclasses.replace(base, **given) if base is not None else config_type(**given)
    except PrismaError:
        raise
    except ValueError as error:
        raise SettingsError(f"{config_type.__name__}: {error}") from None


def check_settings(args: argparse.Namespace) -> None:
    """Builds every config of the command once before any work, so a bad setting fails before anything runs."""
    for config in args.configs:
        config_from_args(config, args, _prefix(config, args.configs))
    if getattr(args, "out", None) and args.command == "run":
        from prisma_core import pipeline

        pipeline.export_target(Workspace(args.workspace), args.out)


# -- commands -----------------------------------------------------------------------------------------------------


def _prefix(config: type, together: Sequence[type]) -> str:
    """Embedding flags get an `embed-` prefix where they share a command with the SAE's (batch size, device)."""
    return "embed_" if config is EmbedConfig and SAEConfig in together else ""


def _dataset_id(workspace: Workspace, args: argparse.Namespace) -> str:
    if args.dataset:
        return args.dataset
    datasets = workspace.datasets()
    if not datasets:
        raise PrismaError("The workspace has no dataset yet: run `python -m prisma_core ingest FILE...` first.")
    return datasets[-1].dataset_id


def _ingest_config(args: argparse.Namespace) -> IngestConfig:
    """The ingest flags; without --id-column, the id column is guessed from the first rows as the Datasets page
    pre-selects it (a column named like an id with unique values), else row numbers."""
    config = config_from_args(IngestConfig, args)
    if config.id_column is not None:
        return config
    return dataclasses.replace(config, id_column=guess_id_column(preview_paths(args.files)))


def cmd_ingest(workspace: Workspace, args: argparse.Namespace) -> str:
    from prisma_core import pipeline

    bars = ProgressBars()
    dataset_id, report = pipeline.ingest(workspace, args.files, args.name, _ingest_config(args), bars)
    bars.close()
    print(f"dataset {dataset_id}: {report.n_documents} documents from {len(report.files)} file(s)")
    if report.empty_ids:
        print(f"  {len(report.empty_ids)} empty documents left out: {', '.join(report.empty_ids[:10])}")
    if report.duplicate_text_ids:
        print(f"  {len(report.duplicate_text_ids)} documents repeat an earlier text (kept)")
    for warning in report.warnings:
        print(f"  warning: {warning}")
    return dataset_id


def cmd_add(workspace: Workspace, args: argparse.Namespace) -> None:
    from prisma_core.pipeline.placement import grow_dataset

    bars = ProgressBars()
    added, placements = grow_dataset(workspace, _dataset_id(workspace, args), args.files, progress=bars)
    bars.close()
    print(f"added {added.n_added} documents: the dataset has {added.n_documents}")
    if added.already_there:
        print(f"  {len(added.already_there)} documents skipped: the dataset holds their text already")
    if added.renamed_ids:
        example = next(iter(added.renamed_ids))
        print(f"  {len(added.renamed_ids)} ids the dataset holds already got a suffix, e.g. {example}")
    _print_placements(placements)


def cmd_place(workspace: Workspace, args: argparse.Namespace) -> None:
    from prisma_core.pipeline.placement import place_in_runs

    bars = ProgressBars()
    placements = place_in_runs(workspace, _dataset_id(workspace, args), bars)
    bars.close()
    _print_placements(placements)


def _print_placements(placements: Sequence[Placement]) -> None:
    for placement in placements:
        print(f"run {placement.run_id}: {placement.verdict()}")


def cmd_embed(workspace: Workspace, args: argparse.Namespace, dataset_id: str | None = None, prefix: str = "") -> None:
    from prisma_core import pipeline

    bars = ProgressBars()
    summary = pipeline.embed_dataset(
        workspace, dataset_id or _dataset_id(workspace, args), config_from_args(EmbedConfig, args, prefix), bars
    )
    bars.close()
    rate = summary.n_tokens / summary.seconds if summary.n_computed else 0.0
    print(
        f"embedded {summary.n_documents} documents ({summary.embedding_key}): {summary.n_computed} computed "
        f"in {summary.n_chunks} chunks, {summary.n_cached} from cache, {summary.seconds:.1f} s"
        + (f", {rate:,.0f} tokens/s" if rate else "")
    )


def cmd_train(workspace: Workspace, args: argparse.Namespace, dataset_id: str | None = None) -> str:
    from prisma_core import pipeline

    dataset_id = dataset_id or _dataset_id(workspace, args)
    embed_config = config_from_args(EmbedConfig, args, "embed_")
    suggested = pipeline.suggested_sae_config(workspace, dataset_id, embed_config)
    bars = ProgressBars()
    summary = pipeline.train_run(
        workspace,
        dataset_id,
        sae_config=config_from_args(SAEConfig, args, base=suggested),
        embed_config=embed_config,
        family_config=config_from_args(FamilyConfig, args),
        theme_config=config_from_args(ThemeConfig, args),
        progress=bars,
    )
    bars.close()
    for warning in summary.warnings:
        print(f"warning: {warning}")
    m = summary.metrics
    holdout = (
        f"held-out FVU n/a ({m['fvu_holdout_note']})"
        if "fvu_holdout_note" in m
        else f"held-out FVU {m['fvu_holdout']:.3f} (variance explained {m['variance_explained_holdout']:.1%})"
    )
    print(
        f"run {summary.run_id}: {holdout}, train FVU {m['fvu_train']:.3f}, dead latents "
        f"{m['dead_fraction']:.1%}, mean L0 {m['mean_l0']:.1f}, {summary.n_themes} themes, "
        f"{summary.n_families} families"
    )
    print(f"  features: {_kept_features(m)}")
    print("  seconds: " + ", ".join(f"{stage} {s:.1f}" for stage, s in summary.seconds.items()))
    if summary.carried:
        print(f"  your edits of run {summary.carried.from_run}: " + "; ".join(summary.carried.summary()))
    _print_themes(workspace, summary.run_id)
    return summary.run_id


def _kept_features(metrics: dict[str, Any]) -> str:
    """E.g. "61 kept of 80 per training, found in most of 3 trainings; 44 in all 3"."""
    kept, trained, compared = metrics["features_kept"], metrics["features_trained"], metrics["n_trainings"]
    if compared == 1:
        return f"{kept} (trained once: how reliably they come back was not checked)"
    return (
        f"{kept} kept of {trained} per training, found in most of {compared} trainings; "
        f"{metrics['found_in_all']} in all {compared}"
    )


def _print_themes(workspace: Workspace, run_id: str) -> None:
    """The run's themes, each followed by its sub-themes, and how many documents fit no theme well."""
    from prisma_core.overview import coverage_sentence
    from prisma_core.runs import load_run

    run = load_run(workspace, run_id)
    for theme in run.theme_info.itertuples():
        print(f"  theme {theme.theme_id}: {theme.label} ({theme.n_documents} documents)")
        for sub in run.subtheme_info[run.subtheme_info["theme_id"] == theme.theme_id].itertuples():
            print(f"    sub-theme {sub.subtheme_id}: {sub.label} ({sub.n_documents} documents)")
    if run.themes is not None:
        print(f"  {coverage_sentence(run)}")


def cmd_themes(workspace: Workspace, args: argparse.Namespace) -> None:
    from prisma_core import pipeline

    run_id = workspace.run_or_latest(args.run).run_id
    themes = pipeline.rebuild_themes(workspace, run_id, config_from_args(ThemeConfig, args), ProgressBars())
    n_subthemes = len(workspace.subthemes(run_id))
    print(f"run {run_id}: {themes.n_themes} themes, {n_subthemes} sub-themes")
    _print_themes(workspace, run_id)


def cmd_families(workspace: Workspace, args: argparse.Namespace) -> None:
    from prisma_core import pipeline

    run_id = workspace.run_or_latest(args.run).run_id
    families = pipeline.rebuild_families(workspace, run_id, config_from_args(FamilyConfig, args), ProgressBars())
    print(f"run {run_id}: {len(families)} families")
    for family in families[:20]:
        print(f"  #{family.family_id} {family.label} ({len(family.members)} features)")


def cmd_export(workspace: Workspace, args: argparse.Namespace, run_id: str | None = None) -> None:
    from prisma_core import pipeline

    paths = pipeline.export_run(workspace, run_id or args.run, args.out)
    print(f"exported {len(paths)} files to {Path(args.out).resolve()}")


def cmd_report(workspace: Workspace, args: argparse.Namespace) -> None:
    from prisma_core.report.writer import write_report
    from prisma_core.runs import load_run

    run = load_run(workspace, args.run)
    path = write_report(workspace, run, args.out, config_from_args(ReportConfig, args))
    print(f"report of run {run.record.run_id} written to {path} ({path.stat().st_size / 2**20:.1f} MB)")


def cmd_list(workspace: Workspace, args: argparse.Namespace) -> None:
    """Lists what can be read; a damaged table or a run missing from the runs table is named in a warning."""
    problems: list[str] = []
    datasets = {dataset.dataset_id: dataset for dataset in _readable(workspace.datasets, problems, [])}
    runs = _readable(workspace.runs, problems, [])
    for dataset_id in dict.fromkeys([*datasets, *(run.dataset_id for run in runs)]):
        dataset = datasets.get(dataset_id)
        print(
            f"{dataset_id}  {dataset.name!r}  {dataset.n_documents} documents"
            if dataset
            else f"{dataset_id}  (its dataset record is missing: `python -m prisma_core repair` restores it)"
        )
        for run in (run for run in runs if run.dataset_id == dataset_id):
            m = run.metrics
            n_features = _readable(lambda run=run: len(workspace.features(run.run_id)), problems, "?")
            sae = run_settings(run).sae
            print(
                f"    {run.run_id}  FVU {m['fvu_holdout']:.3f}  dead {m['dead_fraction']:.1%}  "
                f"n={n_features} k={sae.k if sae is not None else '?'}"
            )
    problems += [
        f"run {run_id} is stored but missing from the runs table (its newest version file is gone); "
        "`python -m prisma_core repair` restores its record"
        for run_id in _readable(workspace.hidden_runs, problems, [])
    ]
    for problem in dict.fromkeys(problems):
        print(f"warning: {problem}")


def _readable(read: Callable[[], T], problems: list[str], otherwise: T) -> T:
    """What `read` returns, or `otherwise` when it meets a damaged table (named in `problems`)."""
    try:
        return read()
    except DamagedTableError as error:
        problems.append(str(error))
        return otherwise


def cmd_repair(workspace: Workspace, args: argparse.Namespace) -> None:
    """Checks every table in full and restores what the store can (see `Workspace.repair`)."""
    report = workspace.repair()
    for line in report:
        print(line)
    if not report:
        print("every table reads in full and every run is listed: nothing to repair")


def cmd_edit(workspace: Workspace, args: argparse.Namespace) -> None:
    """Lists, makes or undoes an edit of a run (see `prisma_core.edits`)."""
    from prisma_core import edits
    from prisma_core.runs import load_run

    config = config_from_args(EditConfig, args)
    run = load_run(workspace, args.run)
    run_id = run.record.run_id
    if config.action == "list":
        _print_edits(workspace.edits(run_id), run)
        return
    if config.action == "undo":
        undone = next((e for e in workspace.edits(run_id) if e.edit_id == config.edit_id), None)
        edits.undo(workspace, run_id, config.edit_id)
        print(f"run {run_id}: undone: {edits.describe(undone) if undone else config.edit_id}")
        return
    if config.id is None:
        raise SettingsError(f"--id is needed: the number of the {config.level} to {config.action}.")
    record = _make_edit(workspace, run, config)
    print(f"run {run_id}: {edits.describe(record)} (edit {record.edit_id}; undo with --action undo --edit-id ...)")


def _make_edit(workspace: Workspace, run: Any, config: EditConfig) -> Any:
    from prisma_core import edits

    if config.action == "rename":
        return edits.rename(workspace, run, config.level, config.id, config.name, config.description)
    if config.action == "merge":
        if config.level != "theme":
            raise SettingsError("Only themes are merged: use --level theme.")
        return edits.merge_themes(workspace, run, config.id, _feature_ids(config.themes))
    if config.action == "split":
        if config.level != "theme":
            raise SettingsError("Only themes are split (into their sub-themes): use --level theme.")
        return edits.split_theme(workspace, run, config.id)
    make = edits.hide if config.action == "hide" else edits.pin
    return make(workspace, run, config.level, config.id)


def _print_edits(records: Sequence[Any], run: Any) -> None:
    from prisma_core import edits

    active = {record.edit_id for record in edits.active_edits(records)}
    skipped = {record.edit_id for record in run.edited.not_applied}
    if not records:
        print(f"run {run.record.run_id}: no edits yet")
    for record in records:
        if record.action == edits.UNDO:
            continue
        state = "undone" if record.edit_id not in active else "not applied" if record.edit_id in skipped else "shown"
        carried = f", carried from run {record.carried_from.split('/')[0]}" if record.carried_from else ""
        print(
            f"{record.edit_id}  {record.created_at[:19]}  {record.author}  {edits.describe(record)}  [{state}{carried}]"
        )


def cmd_carry(workspace: Workspace, args: argparse.Namespace) -> None:
    """Carries an earlier run's edits to a run and compares the two runs' concepts."""
    from prisma_core import carry
    from prisma_core.runs import load_run

    run_id = workspace.run_or_latest(args.run).run_id
    from_run = config_from_args(CarryConfig, args).from_run or carry.previous_edited_run(workspace, run_id)
    if from_run is None:
        raise SettingsError("No earlier run of this dataset has edits: give one with --from-run.")
    report = carry.carry_edits(workspace, from_run, run_id)
    print(f"edits of run {from_run} carried to run {run_id}")
    for line in report.summary():
        print(f"  {line}")
    old, new = load_run(workspace, from_run, with_edits=False), load_run(workspace, run_id, with_edits=False)
    table = carry.counts(
        carry.compare_runs(load_run(workspace, from_run), load_run(workspace, run_id), carry.match_runs(old, new))
    )
    for level, row in table.iterrows():
        print(f"  {level}: " + ", ".join(f"{int(row[status])} {status}" for status in carry.STATUSES))


def cmd_run(workspace: Workspace, args: argparse.Namespace) -> None:
    dataset_id = cmd_ingest(workspace, args)
    cmd_embed(workspace, args, dataset_id, prefix="embed_")
    run_id = cmd_train(workspace, args, dataset_id)
    if args.out:
        cmd_export(workspace, args, run_id)


def _feature_ids(text: str) -> list[int]:
    """`--features 1,2,3`."""
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected feature ids separated by commas, like 1,2,3; got {text!r}"
        ) from None


def _print_label_summary(what: str, summary: LabelSummary, max_errors: int = 5) -> None:
    print(
        f"{what}: {summary.n_labelled} labelled by {summary.model} at {summary.host}, "
        f"{summary.n_skipped} already labelled by it, {summary.n_failed} failed, {summary.n_remaining} not tried"
        + (f", {summary.n_inactive} never fire" if summary.n_inactive else "")
    )
    for error in summary.errors[:max_errors]:
        print(f"  {error}")
    if len(summary.errors) > max_errors:
        print(f"  ... and {len(summary.errors) - max_errors} more failures")


def _print_label_quality(workspace: Workspace, run_id: str) -> None:
    from prisma_core.interpret import labelling

    for row in labelling.label_quality(workspace, run_id).itertuples():
        detection = f", detection {row.mean_detection:.3f} ({row.n_detected} labels)" if row.n_detected else ""
        print(
            f"  {row.source}: {row.n_labels} labels, mean embedding score {row.mean_embedding:.3f} "
            f"({row.n_scored} scored){detection}"
        )


def cmd_label(workspace: Workspace, args: argparse.Namespace) -> None:
    """Exit code 2 (a LabellingError) when Ollama is unreachable, the batch gave up or every label tried failed;
    what was done is kept."""
    from prisma_core.interpret import labelling
    from prisma_core.runs import load_run

    run = load_run(workspace, args.run)
    ollama, config = config_from_args(OllamaConfig, args), config_from_args(LabelConfig, args)
    bars = ProgressBars()
    summaries = {}
    try:
        summaries["features"] = labelling.label_run(workspace, run, ollama, config, args.features, bars)
        for level, kind in (("families", "family"), ("themes", "theme")):
            if getattr(args, level) and not any(s.stop_reason for s in summaries.values()):
                summaries[level] = labelling.label_groups(workspace, run, kind, ollama, config, bars)
    finally:
        bars.close()
    print(f"run {run.record.run_id}")
    for level, summary in summaries.items():
        _print_label_summary(level, summary)
    stop_reason = next((s.stop_reason for s in summaries.values() if s.stop_reason), "")
    if stop_reason:
        raise LabellingError(stop_reason)
    for level, summary in summaries.items():
        if summary.n_failed and not summary.n_labelled:
            raise LabellingError(
                f"No {level} could be labelled: all {summary.n_failed} tried failed (the first: "
                f"{summary.first_error}). The labels they had are kept."
            )


def cmd_score(workspace: Workspace, args: argparse.Namespace) -> None:
    from prisma_core.interpret import labelling
    from prisma_core.runs import load_run

    run = load_run(workspace, args.run)
    run_id = run.record.run_id
    detect_with = config_from_args(OllamaConfig, args) if args.detect else None
    bars = ProgressBars()
    try:
        summary = labelling.score_run(
            workspace, run, config_from_args(ScoreConfig, args), detect_with, args.features, bars
        )
    finally:
        bars.close()
    print(
        f"run {run_id}: {summary.n_embedding} labels given an embedding score ({summary.n_held_out} on held-out "
        f"documents, {summary.n_in_sample} on all activating documents), {summary.n_unscored} left unscored "
        "(feature active on too few documents)"
    )
    if detect_with:
        print(
            f"detection by {detect_with.model}: {summary.n_detection} labels scored, "
            f"{summary.n_detection_failed} failed"
        )
        for error in summary.errors[:5]:
            print(f"  {error}")
    _print_label_quality(workspace, run_id)
    if summary.baseline is not None and summary.baseline.n_scored:
        base = summary.baseline
        print(
            f"labels shown: mean embedding score {base.mean_score:.3f} over {base.n_scored} features; "
            f"the same labels shuffled across features: {base.shuffled_mean:.3f} (chance is 0.5); "
            f"{base.n_too_few} features fire on too few documents to score"
        )
    if summary.stop_reason:
        raise LabellingError(summary.stop_reason)


# -- parser -------------------------------------------------------------------------------------------------------

EMBEDDING_ONLY = ("ray_address", "ray_workers")
"""EmbedConfig settings only embedding a dataset uses: `train` reads stored vectors and embeds its keyword labels on
this machine, so it does not offer them."""


DATASET_HELP = "dataset id (default: the newest)"
RUN_HELP = "run id (default: the newest)"
Commands = Any  # argparse's subparsers action (a private type)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m prisma_core", description="Prisma: interpretable embeddings.")
    commands = parser.add_subparsers(dest="command", required=True)
    _add_dataset_commands(commands)
    _add_run_commands(commands)
    _add_label_commands(commands)
    return parser


def _command(
    commands: Commands, name: str, help_text: str, handler: Any, *configs: type, omit: Collection[str] = ()
) -> argparse.ArgumentParser:
    sub = commands.add_parser(name, help=help_text)
    sub.add_argument(
        "--workspace",
        help="workspace folder or object store prefix s3://bucket/folder (default: $PRISMA_WORKSPACE or ./prisma_data)",
    )
    for config in configs:
        add_config_flags(sub, config, _prefix(config, configs), omit)
    sub.set_defaults(handler=handler, configs=configs)
    return sub


def _add_dataset_commands(commands: Commands) -> None:
    ingest = _command(commands, "ingest", "read files into a new dataset", cmd_ingest, IngestConfig)
    ingest.add_argument("files", nargs="+", type=Path)
    ingest.add_argument("--name", help=NAME_HELP)
    embed = _command(commands, "embed", "embed a dataset (chunk-and-average, cached)", cmd_embed, EmbedConfig)
    embed.add_argument("--dataset", help=DATASET_HELP)
    help_text = "add files' documents to a dataset and place them in its runs (no retraining)"
    add = _command(commands, "add", help_text, cmd_add)
    add.add_argument("files", nargs="+", type=Path)
    add.add_argument("--dataset", help=DATASET_HELP)
    help_text = "place documents added to a dataset in the runs that lack them (after an interrupted add)"
    place = _command(commands, "place", help_text, cmd_place)
    place.add_argument("--dataset", help=DATASET_HELP)
    configs = (IngestConfig, EmbedConfig, SAEConfig, FamilyConfig, ThemeConfig)
    run = _command(commands, "run", "ingest, embed and train with defaults", cmd_run, *configs)
    run.add_argument("files", nargs="+", type=Path)
    run.add_argument("--name", help=NAME_HELP)
    run.add_argument("--out", type=Path, help="also export the run to this folder")


def _add_run_commands(commands: Commands) -> None:
    configs = (SAEConfig, EmbedConfig, FamilyConfig, ThemeConfig)
    train = _command(
        commands, "train", "train an SAE run with themes, labels and families", cmd_train, *configs, omit=EMBEDDING_ONLY
    )
    train.add_argument("--dataset", help=DATASET_HELP)
    families = _command(commands, "families", "recompute the families of a run", cmd_families, FamilyConfig)
    families.add_argument("--run", help=RUN_HELP)
    help_text = "regroup a run's features into themes and sub-themes (e.g. --n-themes 8 --n-subthemes 30)"
    themes = _command(commands, "themes", help_text, cmd_themes, ThemeConfig)
    themes.add_argument("--run", help=RUN_HELP)
    export = _command(commands, "export", "write a run's results to a folder", cmd_export)
    export.add_argument("--run", help=RUN_HELP)
    export.add_argument("--out", required=True, type=Path, help="folder to write the files into (new or empty)")
    help_text = "write a run's report: one HTML file to share, opened in any browser without a server"
    report = _command(commands, "report", help_text, cmd_report, ReportConfig)
    report.add_argument("--run", help=RUN_HELP)
    report.add_argument("--out", required=True, type=Path, help="the HTML file to write, e.g. report.html")
    _command(commands, "list", "list datasets and runs", cmd_list)
    help_text = "rename, merge, hide or pin a run's concepts, list its edits or undo one"
    edit = _command(commands, "edit", help_text, cmd_edit, EditConfig)
    edit.add_argument("--run", help=RUN_HELP)
    help_text = "carry an earlier run's edits to a run trained again, and compare their concepts"
    carry = _command(commands, "carry", help_text, cmd_carry, CarryConfig)
    carry.add_argument("--run", help="the run the edits go to (default: the newest)")
    help_text = "check every table in full; restore a damaged table's last intact version and lost run records"
    _command(commands, "repair", help_text, cmd_repair)


def _add_label_commands(commands: Commands) -> None:
    help_text = "name features (and families, themes) with an Ollama model"
    label = _command(commands, "label", help_text, cmd_label, OllamaConfig, LabelConfig)
    help_text = "score every label (embedding; detection with --detect)"
    score = _command(commands, "score", help_text, cmd_score, ScoreConfig, OllamaConfig)
    for sub in (label, score):
        sub.add_argument("--ollama-host", dest="host", help="Ollama server URL (same as --host; default: $OLLAMA_HOST)")
        sub.add_argument("--run", help=RUN_HELP)
        sub.add_argument("--features", type=_feature_ids, help="only these feature ids, e.g. 1,2,3 (default: all)")
    label.add_argument("--families", action="store_true", help="also name the families, after the features")
    label.add_argument("--themes", action="store_true", help="also name the themes, after the features (and families)")
    score.add_argument("--detect", action="store_true", help="also run the LLM detection check on LLM labels")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        check_settings(args)
        args.handler(Workspace(args.workspace), args)
    except PrismaError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("interrupted: nothing half-written is kept", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0
