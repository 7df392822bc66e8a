"""Configuration: file < environment < flags, role inheritance, clear errors, masked secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from psychoalign.config import env_overrides, load_settings
from psychoalign.errors import ConfigError

TOML = """
[defaults]
backend = "openai"
model = "base-model"
base_url = "http://127.0.0.1:9/v1"
temperature = 0.2

[roles.drive]
model = "drive-model"
temperature = 0.9

[roles.evaluator]
backend = "anthropic"
api_key_env = "EVAL_KEY"
"""


def write(tmp_path: Path, text: str, name: str = "c.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_roles_inherit_defaults(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, TOML), environ={})
    drive = settings.model_spec("drive")
    assert (drive.backend, drive.model, drive.temperature) == ("openai", "drive-model", 0.9)
    assert drive.base_url == "http://127.0.0.1:9/v1"
    mediator = settings.model_spec("mediator")
    assert (mediator.model, mediator.temperature) == ("base-model", 0.2)
    assert settings.model_spec("evaluator").key_env_name() == "EVAL_KEY"


def test_precedence_file_then_env_then_flags(tmp_path: Path) -> None:
    path = write(tmp_path, TOML)
    env = {"PSYCHOALIGN_ROLES__DRIVE__MODEL": "env-model", "PSYCHOALIGN_DEFAULTS__MAX_TOKENS": "77"}
    settings = load_settings(path, environ=env)
    assert settings.model_spec("drive").model == "env-model"
    assert settings.model_spec("mediator").max_tokens == 77
    flagged = load_settings(path, environ=env, overrides={"roles": {"drive": {"model": "flag-model"}}})
    assert flagged.model_spec("drive").model == "flag-model"
    assert flagged.model_spec("drive").max_tokens == 77  # env still applies to other keys


def test_config_file_from_environment_and_cwd(tmp_path: Path) -> None:
    path = write(tmp_path, "[defaults]\nmodel = 'from-env-file'\n", "elsewhere.toml")
    assert load_settings(environ={"PSYCHOALIGN_CONFIG": str(path)}).model_spec().model == "from-env-file"
    write(tmp_path, "defaults:\n  model: from-cwd\n", "psychoalign.yaml")  # cwd is tmp_path
    assert load_settings(environ={}).model_spec().model == "from-cwd"


def test_env_parsing_types() -> None:
    out = env_overrides({"PSYCHOALIGN_CACHE": "true", "PSYCHOALIGN_DEFAULTS__TEMPERATURE": "0.5", "OTHER": "x"})
    assert out == {"cache": True, "defaults": {"temperature": 0.5}}


def test_the_client_credentials_the_docs_export_are_not_settings(tmp_path: Path) -> None:
    """The serve banner says `export PSYCHOALIGN_TOKEN=…`; read as a setting, every command in that
    shell then failed with "invalid configuration at token"."""
    environ = {"PSYCHOALIGN_TOKEN": "t", "PSYCHOALIGN_KEY": "pa-x", "PSYCHOALIGN_API_KEY": "pa-y"}
    assert env_overrides(environ) == {}
    assert load_settings(None, environ={**environ, "PSYCHOALIGN_HOME": str(tmp_path)}).home == str(tmp_path)
    with pytest.raises(ConfigError, match="tokne"):  # any other unknown name is still a typo
        load_settings(None, environ={"PSYCHOALIGN_TOKNE": "t"})


@pytest.mark.parametrize(
    ("text", "name", "match"),
    [
        ("[defaults\nmodel='x'", "bad.toml", "invalid TOML"),
        ("defaults:\n  model: [unclosed\n", "bad.yaml", "line"),
        # a [defaults] value is reported where it was written, not as roles.chat (a table the user never wrote)
        ("[defaults]\ntemperature = 9\n", "c.toml", r"c\.toml: invalid configuration at defaults\.temperature"),
        ("[defaults]\nbackend = 'nope'\n", "c.toml", r"defaults\.backend: .*\(fix backend under \[defaults\]"),
        ("[defaults]\nmodel = 3\n", "c.toml", r"defaults\.model: .*PSYCHOALIGN_DEFAULTS__MODEL"),
        ("[roles.drive]\ntimeout_s = -1\n", "c.toml", r"roles\.drive\.timeout_s"),
        ("surprise = 1\n", "c.toml", "surprise"),
    ],
)
def test_invalid_config_names_the_problem(tmp_path: Path, text: str, name: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        load_settings(write(tmp_path, text, name), environ={})


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_settings(tmp_path / "nope.toml", environ={})


def test_masked_hides_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVAL_KEY", "super-secret")
    text = TOML + '\n[roles.mediator]\napi_key = "inline-secret"\n'
    settings = load_settings(write(tmp_path, text), environ={"PSYCHOALIGN_STORE_URL": "postgresql+asyncpg://u:pw@h/db"})
    dumped = str(settings.masked())
    assert "super-secret" not in dumped and "inline-secret" not in dumped and ":pw@" not in dumped
    assert settings.masked()["roles"]["evaluator"]["api_key_set"] is True


def test_a_bad_value_is_blamed_on_the_layer_that_set_it(tmp_path: Path) -> None:
    """An invalid value set by an environment variable or a flag was reported as the config
    file's ("p.toml: invalid configuration at serve.port"), sending the reader to the wrong place."""
    path = write(tmp_path, "[serve]\nport = 8000\n", "p.toml")
    with pytest.raises(ConfigError, match=r"/p\.toml: invalid configuration at serve\.port") as exc:
        load_settings(write(tmp_path, "[serve]\nport = 99999\n", "p.toml"), environ={})
    assert "docs/configuration.md" in (exc.value.hint or "")
    env = {"PSYCHOALIGN_SERVE__PORT": "99999"}
    with pytest.raises(ConfigError, match=r"^the environment variable PSYCHOALIGN_SERVE__PORT: .*serve\.port"):
        load_settings(path, environ=env)
    with pytest.raises(ConfigError, match=r"^a command-line flag: invalid configuration at serve\.port"):
        load_settings(path, environ=env, overrides={"serve": {"port": 99999}})


def test_each_key_is_named_after_the_layer_it_came_from_by_the_documented_precedence(tmp_path: Path) -> None:
    """A flag over a variable over the file over the defaults, key by key; a role's resolved key
    from its own table when a layer sets it there, else from [defaults]; a variable that gives a
    whole table as JSON sets every key in it; no file at all leaves only defaults."""
    from psychoalign.config import layer_sources

    path = write(tmp_path, TOML + "\n[negotiation]\nk = 3\ntau = 0.6\n")
    environ = {"PSYCHOALIGN_NEGOTIATION__TAU": "0.7", "PSYCHOALIGN_SERVE": '{"port": 9000}', "PSYCHOALIGN_DEBUG": "1"}
    layers = layer_sources(path, environ=environ, overrides={"roles": {"drive": {"temperature": 0.1}}})
    assert layers.of(["negotiation", "k"]) == str(path)
    assert layers.of(["negotiation", "tau"]) == "PSYCHOALIGN_NEGOTIATION__TAU"
    assert layers.of(["serve", "host"]) == "default"
    assert layers.of(["serve", "port"]) == "PSYCHOALIGN_SERVE"
    assert layers.of(["roles", "drive", "temperature"]) == "flag"
    assert layers.of(["roles", "drive", "model"]) == str(path)  # [roles.drive]
    assert layers.of(["roles", "mediator", "model"]) == str(path)  # [defaults]
    assert layers.of(["roles", "mediator", "max_tokens"]) == "default"
    assert layers.of(["source"]) == str(path)
    # the keys the settings hold are what the layers resolve to
    settings = load_settings(path, environ=environ, overrides={"roles": {"drive": {"temperature": 0.1}}})
    assert (settings.negotiation["tau"], settings.serve.port, settings.model_spec("drive").temperature) == (
        0.7,
        9000,
        0.1,
    )
    bare = layer_sources(None, environ={})
    assert {bare.of(p) for p in (["negotiation", "k"], ["roles", "drive", "model"], ["source"])} == {"default"}
