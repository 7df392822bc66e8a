"""TOML errors as one line naming the file, the line and the column, and a fix for that place."""

from __future__ import annotations

from pathlib import Path

import pytest

from psychoalign.config import load_settings
from psychoalign.errors import ConfigError, InputError
from psychoalign.experiments.harness.spec import spec_from_text
from psychoalign.tomlio import parse_toml
from tests.cli.test_main import cli


def _raised(text: str, error: type[ConfigError] | type[InputError] = ConfigError) -> ConfigError | InputError:
    with pytest.raises(error) as caught:
        parse_toml(text, "bad.toml", error=error)
    return caught.value


def test_a_place_in_the_message_becomes_file_line_column() -> None:
    err = _raised("[defaults\nbackend = 1\n")
    assert err.message == "bad.toml:1:10: invalid TOML: Expected ']' at the end of a table declaration"
    assert err.hint == "fix the TOML at that line"
    twice = _raised("[negotiation]\ntau = 0.6\ntau = 0.1\n")
    assert twice.message == "bad.toml:3:10: invalid TOML: Cannot overwrite a value"


def test_an_unclosed_bracket_names_the_end_of_the_file_and_what_to_close() -> None:
    """tomllib says "(at end of document)": there is no line to go to, so the fix says what to look for."""
    for text in ("x = [\n", 'x = """never closed\n', "[defaults]\nmodel ="):
        err = _raised(text)
        assert err.message.startswith("bad.toml: invalid TOML: ") and err.message.endswith(" at the end of the file")
        assert "at that line" not in err.hint and "never closed" in err.hint


def test_the_error_class_is_the_callers_and_good_toml_parses() -> None:
    assert isinstance(_raised("x = [\n", InputError), InputError)
    assert parse_toml("[defaults]\nmodel = 'm'\n", "ok.toml") == {"defaults": {"model": "m"}}


def test_settings_and_experiment_specs_read_toml_through_it(tmp_path: Path) -> None:
    settings = tmp_path / "psychoalign.toml"
    settings.write_text("[defaults]\nmodel = [\n")
    with pytest.raises(ConfigError, match=r"psychoalign\.toml: invalid TOML: .* at the end of the file"):
        load_settings(settings, environ={})
    with pytest.raises(ConfigError, match=r"^spec\.toml:2:7: invalid TOML: "):
        spec_from_text("name = 'x'\nn = 1 2\n", "spec.toml", toml=True)
    out = cli("config", "show", "--config", str(settings))
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 2 and len(lines) == 1 and "never closed" in lines[0], out.stderr
