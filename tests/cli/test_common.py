"""Output scripts can rely on: nothing wraps when stdout is not a terminal, `-h` everywhere, no
library warnings before an error."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from psychoalign.cli.main import COMMANDS
from tests.cli.test_main import cli


def test_config_show_written_to_a_file_parses_back_with_a_long_path(tmp_path: Path) -> None:
    home = tmp_path / ("a-rather-long-folder-name-" * 6) / "home"
    config = tmp_path / "psychoalign.toml"
    config.write_text(f'home = "{home}"\n')
    out = cli("config", "show", "-c", str(config))
    assert out.returncode == 0, out.stderr
    assert len(str(home)) > 80
    assert yaml.safe_load(out.stdout)["home"] == str(home)


@pytest.mark.needs_data(
    "advbench", "jailbreak_templates", "many_shot_jailbreaking", "multi_turn_attack_templates", "xstest"
)
def test_a_preset_shown_into_a_file_runs_as_a_spec(tmp_path: Path) -> None:
    """`psychoalign experiment show paper-table4 > t.yaml && psychoalign experiment run t.yaml --dry-run`."""
    from tests.conftest import SHARED_DATA

    shown = cli("experiment", "show", "paper-table4")
    assert shown.returncode == 0, shown.stderr
    spec = tmp_path / "t.yaml"
    spec.write_text(shown.stdout)
    assert yaml.safe_load(shown.stdout)["description"].startswith("Adversarial robustness (paper Table 4)")
    out = cli("experiment", "run", str(spec), "--dry-run", "--json", env={"PSYCHOALIGN_DATA_DIR": str(SHARED_DATA)})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)


def test_experiment_show_json_carries_the_run_id() -> None:
    out = cli("experiment", "show", "paper-table4", "--json")
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert body["spec"]["name"] == "paper-table4"
    assert len(body["run_id"]) >= 8


def test_experiment_show_names_each_systems_kind() -> None:
    """Systems given by name alone were shown as `kind: ''`: each now shows the kind that runs
    (its name), and the run id is unchanged by it."""
    out = cli("experiment", "show", "paper-table3")
    assert out.returncode == 0, out.stderr
    systems = yaml.safe_load(out.stdout)["systems"]
    assert [s["kind"] for s in systems] == [s["name"] for s in systems] and "kind: ''" not in out.stdout
    assert "run id: paper-table3-" in out.stderr


def test_experiment_show_of_a_named_experiment_says_how_to_see_its_options() -> None:
    # `experiment list` lists boundary, h1, ... as experiments `experiment run` knows; `show` said
    # "no spec file or preset named 'boundary'" and listed only the presets.
    out = cli("experiment", "show", "boundary")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "named experiment" in out.stderr and "psychoalign experiment run boundary -h" in out.stderr


@pytest.mark.parametrize("command", ["data", "config", "star", "experiment"])
def test_dash_h_is_help_on_groups_and_their_commands(command: str) -> None:
    group = cli(command, "-h")
    assert group.returncode == 0, group.stderr
    assert "Usage:" in group.stdout
    assert re.search(r"--help\s+-h\b", group.stdout)


def test_dash_h_on_a_leaf_command_and_the_root() -> None:
    for args in (("-h",), ("data", "list", "-h"), ("config", "show", "-h"), ("chat", "-h")):
        out = cli(*args)
        assert out.returncode == 0, (args, out.stderr)
        assert "Usage:" in out.stdout, args
    assert "data" in COMMANDS


def test_lab_add_lead_without_a_terminal_prints_only_its_own_error(tmp_path: Path) -> None:
    config = tmp_path / "psychoalign.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\n')
    out = cli("lab", "add-lead", "--username", "boss", "-c", str(config), stdin="")
    assert out.returncode != 0
    assert "Warning" not in out.stderr and "echoed" not in out.stderr
    assert "error: no password was given" in out.stderr


def test_serve_key_and_frameworks_validate_print_json(tmp_path: Path) -> None:
    import hashlib

    from tests.conftest import ROOT

    key = cli("serve-key", "-d", "lab", "--json")
    assert key.returncode == 0, key.stderr
    body = json.loads(key.stdout)
    assert body["deployment"] == "lab"
    assert body["sha256"] == hashlib.sha256(body["key"].encode()).hexdigest()
    fw = cli("frameworks", "validate", str(ROOT / "examples" / "my-clinic.yaml"), "--json")
    assert fw.returncode == 0, fw.stderr
    assert json.loads(fw.stdout) | {"sha256": None} == {
        "ok": True,
        "name": "my-clinic",
        "version": "1.2.0",
        "rules": 3,
        "sha256": None,
    }


def test_help_paragraphs_are_reflowed_and_flags_show_no_type() -> None:
    """A docstring's line breaks do not cut sentences in the help, and a flag takes no value."""
    from psychoalign.cli.main import load_command

    for name in COMMANDS:
        command = load_command(name)
        stack = [command]
        while stack:
            c = stack.pop()
            assert "\n" not in (c.help or "").replace("\n\n", ""), c.name
            stack.extend(getattr(c, "commands", {}).values())
    out = cli("data", "list", "-h")
    row = next(line for line in out.stdout.splitlines() if "--json" in line)
    assert "<bool>" not in row


def test_root_commands_are_grouped_in_panels_in_listing_order() -> None:
    from psychoalign.cli.main import PANELS

    assert list(PANELS) == list(COMMANDS)
    seen: list[str] = []
    for panel in PANELS.values():
        if not seen or seen[-1] != panel:
            assert panel not in seen, f"panel {panel} is split"
            seen.append(panel)
    assert seen == ["Run", "Serve", "Research", "Lab", "Inspect"]
    out = cli("--help")
    assert out.returncode == 0
    for panel in seen:
        assert f"─ {panel} ─" in out.stdout


def _command_paths() -> list[tuple[str, ...]]:
    """Every command under the root, as the words that name it (``("star", "campaign", "run")``)."""
    from psychoalign.cli.main import load_command

    paths: list[tuple[str, ...]] = []
    stack: list[tuple[tuple[str, ...], Any]] = [((name,), load_command(name)) for name in COMMANDS]
    while stack:
        path, command = stack.pop()
        paths.append(path)
        stack.extend(((*path, sub), c) for sub, c in getattr(command, "commands", {}).items())
    return sorted(paths)


def test_no_help_shows_a_value_type_beside_a_flag() -> None:
    """Every command's help, the root's and the groups' included: flags (``--help`` too) read as
    flags, never ``<bool>`` as if they took a value."""
    from typer.testing import CliRunner

    from psychoalign.cli.main import app

    runner = CliRunner()
    paths = [(), *_command_paths()]
    assert len(paths) > len(COMMANDS)  # the groups' sub-commands were walked too
    for path in paths:
        out = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "160"})
        assert out.exit_code == 0, (path, out.output)
        assert "Usage:" in out.output, path
        assert "<bool>" not in out.output, (path, [line for line in out.output.splitlines() if "<bool>" in line])


def test_named_experiments_help_reads_like_every_other_command() -> None:
    """``experiment run NAME`` builds the named experiment's command on the fly: its help takes
    ``-h`` and shows flags as flags, as the commands the walk above reaches do."""
    from typer.testing import CliRunner

    from psychoalign.cli.experiment import experiment_registry
    from psychoalign.cli.main import app

    names = sorted(experiment_registry().commands)
    assert names  # boundary, h1, ...
    runner = CliRunner()
    for name in names:
        for flag in ("-h", "--help"):
            out = runner.invoke(app, ["experiment", "run", name, flag], env={"COLUMNS": "160"})
            assert out.exit_code == 0, (name, flag, out.output)
            assert f"psychoalign experiment run {name}" in out.output
            assert "<bool>" not in out.output, (name, [line for line in out.output.splitlines() if "<bool>" in line])


# -- progress bars and stray output ----------------------------------------------------------------

#: What rich draws a bar with (a filled or empty cell of BarColumn).
BAR = "━"


def _run(*args: str, terminal: bool) -> subprocess.CompletedProcess[str]:
    """The CLI as a subprocess whose output is captured (a pipe); ``terminal`` makes rich treat
    it as a terminal anyway (TTY_COMPATIBLE=1), as a user's shell would be. Whatever the outer
    environment says about colour or terminals, or which warnings to show, is left out."""
    env = {k: v for k, v in os.environ.items() if k not in _TERMINAL_ENV}
    if terminal:
        env["TTY_COMPATIBLE"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "psychoalign", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


_TERMINAL_ENV = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "PYTHONWARNINGS", "COLUMNS")


@pytest.mark.parametrize("terminal", [False, True], ids=["piped", "terminal"])
def test_star_analyze_draws_its_bar_on_a_terminal_only(tmp_path: Path, terminal: bool) -> None:
    from tests.conftest import ROOT

    out = _run(
        "star", "analyze", str(ROOT / "examples" / "ratings.csv"), "--item-col", "conversation_id",
        "--rater-col", "rater_id", "--rating-col", "score", "--no-embed", "--bootstrap", "20",
        "--out", str(tmp_path / "r"), terminal=terminal,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "r" / "report.json").is_file()
    assert "wrote " in out.stderr and out.stdout == ""
    if terminal:  # the bar's last frame (8 sections of the one dataset) before it is erased
        assert BAR in out.stderr and re.search(r"analysing.*8/8", out.stderr)
    else:
        assert BAR not in out.stderr and "analysing" not in out.stderr


@pytest.mark.parametrize("terminal", [False, True], ids=["piped", "terminal"])
@pytest.mark.parametrize(
    "command",
    [
        # the calibration set reads several folders: the whole data directory
        pytest.param(("judge", "eval-harm", "--tier", "classifier"), marks=pytest.mark.needs_data, id="eval-harm"),
        pytest.param(
            ("judge", "eval-jailbreak", "--tier", "refusal"),
            marks=pytest.mark.needs_data("jailbreakbench"),
            id="eval-jailbreak",
        ),
    ],
)
def test_judge_evals_draw_their_bar_on_a_terminal_only(command: tuple[str, ...], terminal: bool) -> None:
    from tests.conftest import SHARED_DATA

    out = _run(*command, "--limit", "2", "--data", str(SHARED_DATA), terminal=terminal)
    assert out.returncode == 0, out.stderr
    assert "n = 2 " in out.stdout and BAR not in out.stdout
    # figures on 2 responses: one warning line on stderr, whether or not a bar is drawn
    warnings = [line for line in out.stderr.splitlines() if "warning: fewer than 10 responses" in line]
    assert len(warnings) == 1, out.stderr
    if terminal:
        assert BAR in out.stderr and re.search(r"judged.*2/2", out.stderr)
    else:  # piped: warnings only (a judge that told 2 responses apart by nothing adds its own), no bar
        assert BAR not in out.stderr and out.stderr.endswith("\n")
        assert all(line.startswith("warning: ") for line in out.stderr.splitlines()), out.stderr


@pytest.mark.parametrize(
    "args",
    [("--help",), ("config", "show"), ("frameworks", "list"), ("data", "list"), ("models", "list")],
    ids=" ".join,
)
def test_everyday_commands_print_no_library_warning(args: tuple[str, ...]) -> None:
    """Python's default warning filters, as a user runs it: nothing but the command's own output."""
    out = _run(*args, terminal=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()
    assert "Warning" not in out.stdout + out.stderr
    assert out.stderr == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("negotiate", "--tau", "abc", "x"),
            "error: Invalid value for '--tau': Input should be a valid number, unable to parse string as a number"
            " — see `{prog} negotiate -h`",
        ),
        (("experiment", "cells", "r", "--json"), "error: No such option: --json"),
        (("bogus",), "error: No such command 'bogus'. — see `{prog} -h`"),
        (("experiment", "cells"), "error: Missing argument 'run_id'. — see `{prog} experiment cells -h`"),
    ],
)
def test_a_usage_error_is_one_line_on_a_pipe(args: tuple[str, ...], message: str) -> None:
    """Usage errors were a boxed panel wrapped at 80 columns even on a pipe (the --tau message
    was split across two box lines); now one line, exit status 2, like every other error."""
    out = cli(*args)  # run as `python -m psychoalign`, which is the program name click reports
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith(message.format(prog="python -m psychoalign")), out.stderr
    assert out.stderr.count("\n") == 1 and "╭" not in out.stderr and "Usage:" not in out.stderr
    assert out.stdout == ""


def test_a_bare_group_still_prints_its_help() -> None:
    out = cli("star")
    assert out.returncode == 2 and "Usage: python -m psychoalign star" in out.stdout and out.stderr == ""


def test_ctrl_c_while_models_load_in_threads_is_raised_once_the_imports_are_done() -> None:
    """A KeyboardInterrupt raised inside importlib's lock bookkeeping (a weakref callback) is
    swallowed and leaves the import lock held: with the model-preload threads importing, the
    process then hung forever (seen on `negotiate`, Ctrl-C 1.6 s after start). In that window the
    interrupt is kept and raised at the window's end instead."""
    import signal

    from psychoalign.cli.common import deferred_interrupt

    before = signal.getsignal(signal.SIGINT)
    reached: list[str] = []

    def window() -> None:
        with deferred_interrupt():
            os.kill(os.getpid(), signal.SIGINT)
            reached.append("the rest of the window ran")

    with pytest.raises(KeyboardInterrupt):
        window()
    assert reached == ["the rest of the window ran"]
    assert signal.getsignal(signal.SIGINT) is before
    with deferred_interrupt():  # no signal: nothing raised
        reached.append("quiet")
    assert reached[-1] == "quiet"
