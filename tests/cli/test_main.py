"""The CLI as a user runs it: a subprocess of the installed console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.loopback import FakeServer, Scripted, fake_endpoint, openai_reply


def cli(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "psychoalign", *args],
        capture_output=True,
        text=True,
        env=full_env,
        input=stdin,
        timeout=120,
        check=False,
    )


def test_help_lists_commands() -> None:
    out = cli("--help")
    assert out.returncode == 0
    for command in ("chat", "models", "config"):
        assert command in out.stdout


def test_the_command_list_shows_each_commands_own_help_line() -> None:
    """The root help lists the sub-commands without loading them; each listed line is the first
    paragraph of the loaded command's own help."""
    import inspect

    from psychoalign.cli.main import COMMANDS, load_command

    for name, (_, line) in COMMANDS.items():
        command = load_command(name)
        assert command.name == name
        assert inspect.cleandoc(command.short_help or command.help or "").split("\n\n")[0] == line, name


def test_help_and_version_load_no_command_module() -> None:
    """`psychoalign --help` and `--version` import the command table only: no sub-command
    module and none of the libraries the commands use (start-up time). Nor typer's help module,
    which loads Markdown, Pygments and rich's tracebacks (cli/roothelp.py draws the root help)."""
    ours = {"psychoalign", "psychoalign.errors", "psychoalign.lazy", "psychoalign.textio", "psychoalign.cli"}
    ours |= {"psychoalign.cli.main", "psychoalign.cli.common", "psychoalign.cli.roothelp"}
    heavy = ("sqlalchemy", "numpy", "scipy", "pandas", "matplotlib", "torch", "llama_cpp", "aiohttp", "fastapi")
    heavy += ("pydantic", "httpx", "a2a", "yaml", "asyncio", "markdown_it", "pygments", "attr")
    for flag in ("--help", "--version"):
        out = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "psychoalign", flag],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        loaded = {
            line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")
        }
        assert {m for m in loaded if m.startswith("psychoalign")} <= ours, flag
        assert not {m for m in loaded if m.split(".")[0] in heavy}, flag
        assert "typer.rich_utils" not in loaded, flag


def test_version_prints_the_installed_version() -> None:
    from importlib.metadata import version

    import psychoalign

    assert psychoalign.__version__ == version("psychoalign")  # pyproject.toml and the package agree
    for flag in ("--version", "-V"):
        out = cli(flag)
        assert out.returncode == 0, out.stderr
        assert out.stdout == f"psychoalign {version('psychoalign')}\n"


def test_chat_against_openai_compatible_server_json() -> None:
    fake = FakeServer(default=Scripted(openai_reply("[bold]not markup[/bold]")))
    with fake_endpoint("/v1/chat/completions", fake):
        out = cli("chat", "--backend", "openai", "--model", "m", "--base-url", f"{fake.url}/v1", "--json", "hi")
        plain = cli("chat", "--backend", "openai", "--model", "m", "--base-url", f"{fake.url}/v1", "hi")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["text"] == "[bold]not markup[/bold]"
    assert "[bold]not markup[/bold]" in plain.stdout  # model text is printed literally


def test_chat_prompt_from_stdin() -> None:
    fake = FakeServer(default=Scripted(openai_reply("ok")))
    with fake_endpoint("/v1/chat/completions", fake):
        out = cli("chat", "-b", "openai", "--base-url", f"{fake.url}/v1", "-", stdin="from stdin")
    assert out.returncode == 0, out.stderr
    assert fake.requests[0]["messages"][-1]["content"] == "from stdin"


def test_bad_input_gives_one_clean_line() -> None:
    cases = [
        (("chat", "--backend", "nope", "hi"), "unknown backend 'nope'"),
        (("chat", "--backend", "openai", "hi"), "OPENAI_API_KEY"),
        (("chat", "--backend", "scripted", ""), "prompt is empty"),
        (("chat", "--config", "missing.toml", "hi"), "cannot read config file"),
        (("chat", "-b", "openai", "--base-url", "http://127.0.0.1:9/v1", "hi"), "connection refused"),
        # a typo'd role used to fall back to the defaults silently and answer from another model
        (("chat", "--role", "evaluater", "hi"), "unknown role 'evaluater'"),
    ]
    for args, message in cases:
        out = cli(*args, env={"PSYCHOALIGN_DEFAULTS__MAX_RETRIES": "0"})
        assert out.returncode != 0, args
        assert message in out.stderr, (args, out.stderr)
        assert "Traceback" not in out.stderr


def test_debug_shows_traceback() -> None:
    out = cli("--debug", "chat", "--backend", "nope", "hi")
    assert out.returncode != 0
    assert "Traceback" in out.stderr


def test_config_show_masks_and_reports_precedence(tmp_path: Path) -> None:
    config = tmp_path / "p.toml"
    config.write_text('[defaults]\nbackend = "openai"\nbase_url = "http://x/v1"\n[roles.drive]\nmodel = "d"\n')
    out = cli(
        "config",
        "show",
        "--config",
        str(config),
        "--json",
        env={"OPENAI_API_KEY": "sk-very-secret", "PSYCHOALIGN_ROLES__DRIVE__TEMPERATURE": "0.7"},
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["roles"]["drive"]["model"] == "d"
    assert data["roles"]["drive"]["temperature"] == 0.7
    assert data["roles"]["drive"]["api_key_set"] is True
    assert "sk-very-secret" not in out.stdout
    assert data["source"] == str(config)


def test_models_list_json() -> None:
    out = cli("models", "list", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["backend"]: r for r in json.loads(out.stdout)["backends"]}
    assert set(rows) == {"local", "classifier", "openai", "anthropic", "gemini", "scripted"}
    assert rows["scripted"]["usable"] is True
    assert rows["classifier"]["usable"] is True  # shipped weights + the offline MiniLM package
    roles = json.loads(out.stdout)["roles"]
    # Honest labels: which model each role runs on, the classifier with version and weights hash.
    assert roles["drive"] == "local:smollm2-135m-instruct"
    assert roles["evaluator"].startswith("classifier:evaluator-minilm-v14@")
    assert rows["openai"]["usable"] is False  # no key in the test environment


def test_models_list_probes_a_backend_with_the_configured_roles_spec(tmp_path: Path) -> None:
    """With every role on an endpoint's base_url (docs/configuration.md, "Try it"), the backends
    table says that backend is usable there, not "set $OPENAI_API_KEY or base_url"."""
    config = tmp_path / "psychoalign.toml"
    config.write_text('[defaults]\nbackend = "openai"\nbase_url = "http://127.0.0.1:11434/v1"\nmodel = "qwen3:8b"\n')
    env = {"OPENAI_API_KEY": ""}
    out = cli("models", "list", "--json", "--config", str(config), env=env)
    assert out.returncode == 0, out.stderr
    rows = {r["backend"]: r for r in json.loads(out.stdout)["backends"]}
    assert (rows["openai"]["usable"], rows["openai"]["detail"]) == (True, "endpoint http://127.0.0.1:11434/v1")
    assert set(json.loads(out.stdout)["roles"].values()) == {"openai:qwen3:8b"}


def test_experiment_list_shows_each_named_experiments_whole_summary() -> None:
    """A summary wrapped over two docstring lines was cut at the first ("… psychoalign with and
    without"): the list shows the first paragraph whole."""
    out = cli("experiment", "list", "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)["experiments"]["cross-turn-scripted"]
    assert summary.startswith("Cross-turn tension on a scripted world")
    assert "with and without the track" in summary and "\n" not in summary


# Commands that print no data of their own: servers (experiment view is one), and those whose output goes to files (with
# --format / -o / --out: every format they write is machine-readable already).
_NO_JSON = {"serve", "serve-a2a", "up", "agent serve", "experiment view"}


def _leaves(command: object, path: list[str]) -> list[tuple[str, object]]:
    subs = getattr(command, "commands", None)
    if subs:
        return [leaf for name, sub in subs.items() for leaf in _leaves(sub, [*path, name])]
    return [(" ".join(path), command)]


def test_every_command_that_prints_data_has_json() -> None:
    from psychoalign.cli.main import COMMANDS, load_command

    missing = []
    for name in COMMANDS:
        for path, command in _leaves(load_command(name), [name]):
            opts = {o for p in getattr(command, "params", []) for o in getattr(p, "opts", [])}
            writes_files = bool(opts & {"--format", "-o", "--out"})
            if path not in _NO_JSON and not writes_files and "--json" not in opts:
                missing.append(path)
    assert missing == []


def test_small_commands_answer_in_json(tmp_path: Path) -> None:
    policy_file = Path(__file__).resolve().parents[2] / "src/psychoalign/star/builtin/policy.yaml"
    policy = cli("star", "policy", "validate", str(policy_file), "--json")
    assert policy.returncode == 0, policy.stderr
    assert json.loads(policy.stdout)["kind"] == "policy"
    path = cli("data", "path", "--data", str(tmp_path), "--json")
    assert path.returncode == 0, path.stderr
    assert json.loads(path.stdout) == {"data_dir": str(tmp_path)}
    store = {"PSYCHOALIGN_HOME": str(tmp_path)}
    added = cli("star", "participants", "add", "--id", "p1", "--race", "Asian", "--json", env=store)
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout) == {"added": ["p1"]}


def test_a_schema_file_that_is_not_json_names_the_place_and_the_fix(tmp_path: Path) -> None:
    """`chat --schema` on a broken file said where, not how to fix it."""
    bad = tmp_path / "bad.json"
    bad.write_text('{"type": "object",\n "properties": }\n')
    out = cli("chat", "--backend", "scripted", "--schema", str(bad), "hi")
    assert out.returncode == 2, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and f"{bad}:2:16: invalid JSON" in lines[0], out.stderr
    assert "examples/answer.schema.json" in lines[0], out.stderr


def _run_raising(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> object:
    """The CLI's entry point over a two-command app whose command `work` raises ``error``; the
    exit status it ends with (two commands, so typer keeps the command name as an argument)."""
    import typer

    import psychoalign.cli.main as cli_main

    app = typer.Typer()

    @app.command()
    def work() -> None:
        raise error

    @app.command()
    def other() -> None:
        pass

    monkeypatch.setattr(cli_main, "app", app)
    monkeypatch.setattr(sys, "argv", ["psychoalign", "work"])
    with pytest.raises(SystemExit) as exc:
        cli_main.run()
    return exc.value.code


def test_ctrl_c_inside_a_command_says_interrupted_and_exits_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Typer turns a KeyboardInterrupt inside a command into Exit(130), returned (not raised) when
    not standalone: an interrupted `experiment run` used to exit 130 without a word."""
    assert _run_raising(monkeypatch, KeyboardInterrupt()) == 130
    assert capsys.readouterr().err.strip() == "interrupted"


def _into_closed_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI with its standard output a pipe whose reader has already gone, as `| head -1`
    leaves it once head has its line: every write to it fails with EPIPE. Deterministic: the
    reader is closed before the command starts."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "psychoalign", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    "args",
    [
        ("--version",),
        ("experiment", "list"),
        ("experiment", "list", "--json"),
        ("experiment", "show", "paper-table3"),
        ("models", "list", "--json"),
        ("frameworks", "list"),
    ],
)
def test_output_piped_into_head_exits_0_quietly(args: tuple[str, ...]) -> None:
    """`psychoalign experiment list | head -1` exited 1 (typer's answer to EPIPE), failing a
    `set -o pipefail` script whose head had all it wanted. A reader that stops reading is not an
    error: exit 0, nothing on stderr (no traceback, no "Exception ignored" at exit)."""
    res = _into_closed_pipe(*args)
    assert (res.returncode, res.stderr) == (0, "")


def test_a_broken_connection_is_still_an_error_when_the_output_is_open(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only a closed standard output exits 0: EPIPE from anything else (a socket the command
    wrote to) is a failure, said in one line with status 1 (typer alone exits 1 without a word)."""
    assert _run_raising(monkeypatch, BrokenPipeError(32, "Broken pipe")) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: broken pipe") and len(err.splitlines()) == 1
