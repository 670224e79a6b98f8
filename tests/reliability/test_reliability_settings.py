"""Settings that would destroy data or cannot work are refused before any work, with one `error:` line: NaN and
infinities, values out of range, malformed hosts, a GPU that is not there (rounds 2 and 3).
"""

import dataclasses
from pathlib import Path

import pytest
from reliability_helpers import Trained, cli_main, error_lines, snapshot

from prisma_core import cli, pipeline
from prisma_core.cli.flags import flag_prefix
from prisma_core.errors import TrainingError
from prisma_core.sae import SAEConfig
from prisma_core.store import Workspace

# -- settings that destroy data ---------------------------------------------------------------------------------------

FLOAT_SETTINGS = [
    ("families", "--tau"),
    ("themes", "--member-share"),
    ("train", "--lr"),
    ("train", "--grad-clip"),
    ("train", "--vectors-memory-mb"),
    ("train", "--aux-alpha"),
    ("label", "--timeout-s"),
    ("label", "--temperature"),
    ("score", "--timeout-s"),
]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_nan_and_infinities_are_refused_for_every_float_setting_before_any_work(
    workspace: Workspace, value: str, capsys
) -> None:
    before = snapshot(workspace)
    families = workspace.groups.families(workspace.run_or_latest().run_id)
    for command, flag in FLOAT_SETTINGS:
        assert cli_main(command, f"{flag}={value}", workspace=workspace) == 2, (command, flag)
        (message,) = error_lines(capsys.readouterr().err)
        assert f"must be a finite number, got {value}" in message, (command, flag, message)
    assert snapshot(workspace) == before
    assert workspace.groups.families(workspace.run_or_latest().run_id) == families


def test_run_with_a_nan_setting_leaves_no_dataset_behind(small_run, tmp_path: Path, capsys) -> None:
    workspace = Workspace(tmp_path / "empty")
    assert cli.main(["run", str(small_run.corpus), "--lr", "nan", "--workspace", str(workspace.path)]) == 2
    assert "lr must be a finite number" in error_lines(capsys.readouterr().err)[0]
    assert workspace.datasets() == []


@pytest.mark.parametrize(
    "flags",
    [
        ["run", "{file}", "--embed-batch-size", "0"],
        ["run", "{file}", "--tau", "2"],
        ["run", "{file}", "--iterations", "0"],
        ["run", "{file}", "--min-family-size", "1"],
        ["run", "{file}", "--n-features", "38400000"],
        ["families", "--tau", "2"],
        ["label", "--timeout-s", "0"],
        ["label", "--n-evidence", "0"],
        ["score", "--n-evidence", "0"],
    ],
)
def test_settings_out_of_range_fail_before_any_work(trained: Trained, tmp_path: Path, capsys, flags) -> None:
    notes = tmp_path / "notes.csv"
    notes.write_text("text\n" + "a note about chest pain\n" * 30)
    workspace = Workspace(trained.path)
    before = snapshot(workspace)

    status = cli_main(*[flag.format(file=notes) for flag in flags], workspace=trained.path)

    assert status == 2
    (line,) = error_lines(capsys.readouterr().err)
    assert flags[-2].lstrip("-").replace("-", "_").removeprefix("embed_") in line
    assert snapshot(Workspace(trained.path)) == before  # nothing ingested, embedded or trained


@pytest.mark.parametrize("host", ["http://h:notaport", "http://u:pw-secret@[::1", "http://h:99999"])
def test_a_malformed_host_is_refused_as_a_setting(workspace: Workspace, host: str, capsys) -> None:
    assert cli_main("label", "--ollama-host", host, workspace=workspace) == 2
    stderr = capsys.readouterr().err
    (message,) = error_lines(stderr)
    assert "is not a valid URL" in message and "pw-secret" not in stderr and "Traceback" not in stderr


def test_embedding_on_a_missing_gpu_names_the_missing_gpu(workspace: Workspace, capsys) -> None:
    assert cli_main("embed", "--device", "cuda", workspace=workspace) == 2
    (message,) = error_lines(capsys.readouterr().err)
    assert message == 'error: Device "cuda" was asked for but no CUDA GPU is available here; use "auto" or "cpu".'


def test_missing_gpu_is_reported_before_anything_is_written(trained: Trained) -> None:
    workspace = Workspace(trained.path)
    before = snapshot(workspace)
    with pytest.raises(TrainingError, match="no CUDA GPU"):
        pipeline.train_run(workspace, trained.dataset_id, SAEConfig(n_features=64, k=4, device="cuda"))
    assert snapshot(Workspace(trained.path)) == before


# -- round 4: every count is bounded ---------------------------------------------------------------------------------


def numeric_flags() -> list[tuple[str, str, str, float]]:
    """(command, flag, setting, maximum) of every whole-number or float setting each command offers."""
    flags = []
    commands = next(action for action in cli.build_parser()._actions if action.dest == "command").choices
    for command, parser in commands.items():
        configs = parser.get_default("configs")
        for config in configs:
            prefix = flag_prefix(config, configs)
            bounds = {prefix + field.name: field for field in dataclasses.fields(config)}
            for action in parser._actions:
                if action.dest in bounds and action.type in (int, float):
                    field = bounds[action.dest]
                    flags.append((command, action.option_strings[0], field.name, field.metadata.get("maximum")))
    return flags


def test_every_numeric_setting_of_every_command_has_a_bound_and_a_value_past_it_is_refused(
    workspace: Workspace, tmp_path: Path, capsys
) -> None:
    flags = numeric_flags()
    assert ("train", "--epochs", "epochs", 1000) in flags and len(flags) > 60
    assert [flag for flag in flags if flag[3] is None] == []  # a missing bound fails here, naming the setting
    before = snapshot(workspace)
    for command, flag, name, maximum in flags:
        if command in ("ingest", "run", "add"):
            continue  # they need files: checked below
        too_many = str(int(maximum) * 10 + 1)
        out = ["--out", str(tmp_path / "out")] if command in ("report", "export", "trends") else []
        assert cli_main(command, flag, too_many, *out, workspace=workspace) == 2, (command, flag)
        (message,) = error_lines(capsys.readouterr().err)
        assert f"{name} must be" in message and f"got {too_many}" in message, (command, flag, message)
    assert cli_main("ingest", str(workspace.path), "--batch-rows", "100000000000", workspace=workspace) == 2
    assert "batch_rows must be a whole number between 1 and 1000000" in error_lines(capsys.readouterr().err)[0]
    assert snapshot(workspace) == before


def test_train_with_a_hundred_million_epochs_is_refused_before_any_work(workspace: Workspace, capsys) -> None:
    before = snapshot(workspace)
    assert cli_main("train", "--epochs", "100000000", workspace=workspace) == 2
    (message,) = error_lines(capsys.readouterr().err)
    assert message == "error: Invalid SAE settings: epochs must be a whole number between 1 and 1000, got 100000000."
    assert snapshot(workspace) == before
