"""A mistake in a scripted role's reply file stops `chat` and `negotiate` with one line naming the
file, the line and the fix (exit status 2), before any model is called."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from psychoalign.cli.main import app
from psychoalign.errors import ConfigError
from tests.cli.test_main import cli

BAD_REGEX = 'rules:\n  - match: "(unclosed"\n    reply: hi\ndefault: x\n'
NO_MATCH = "rules:\n  - reply: hi\ndefault: x\n"


def _config(tmp_path: Path, role: str, script: str) -> Path:
    path = tmp_path / "script.yaml"
    path.write_text(script, encoding="utf-8")
    config = tmp_path / "psychoalign.toml"
    config.write_text(
        f'home = "{tmp_path / "home"}"\n[roles.{role}]\nbackend = "scripted"\nscript = "{path}"\n', encoding="utf-8"
    )
    return config


@pytest.mark.parametrize(
    ("command", "role"),
    [(("chat", "hi"), "chat"), (("negotiate", "--no-store", "how do I bake bread?"), "evaluator")],
    ids=["chat", "negotiate"],
)
@pytest.mark.parametrize(
    ("script", "message"),
    [(BAD_REGEX, "script.yaml:2: rule 1: 'match' is not a valid regular expression"),
     (NO_MATCH, "script.yaml:2: rule 1 has no 'match'")],
    ids=["bad-regex", "no-match"],
)  # fmt: skip
def test_commands_refuse_a_bad_script_with_a_config_error(
    tmp_path: Path, command: tuple[str, ...], role: str, script: str, message: str
) -> None:
    config = _config(tmp_path, role, script)
    result = CliRunner().invoke(app, [command[0], "-c", str(config), *command[1:]])
    assert isinstance(result.exception, ConfigError), result.output
    assert message in result.exception.message and result.exception.exit_code == 2


def test_the_error_is_one_line_with_exit_status_2_and_no_traceback(tmp_path: Path) -> None:
    config = _config(tmp_path, "chat", BAD_REGEX)
    out = cli("chat", "-c", str(config), "hi")
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert lines[0].startswith(f"error: {tmp_path / 'script.yaml'}:2: rule 1:") and "escape characters" in lines[0]


def test_a_missing_script_file_is_one_line_naming_it_and_the_fix(tmp_path: Path) -> None:
    """A script path that does not exist printed the OS error's repr ("[Errno 2] …") and no fix."""
    config = tmp_path / "psychoalign.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\n[roles.chat]\nbackend = "scripted"\nscript = "gone.yaml"\n')
    result = CliRunner().invoke(app, ["chat", "-c", str(config), "hi"])
    assert isinstance(result.exception, ConfigError), result.output
    assert str(result.exception) == "cannot read script file gone.yaml: No such file or directory (check the path)"
