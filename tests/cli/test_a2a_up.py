"""`psychoalign up`: each child process gets only its own token and its own model API key."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
import yaml

from psychoalign.cli import a2a as a2a_cli
from psychoalign.config import load_settings
from psychoalign.errors import ConfigError

# Each role on its own endpoint with its own key variable; the MEDIATOR on the provider default.
CONFIG = """\
[roles.drive]
backend = "openai"
base_url = "http://drive.internal/v1"
api_key_env = "DRIVE_API_KEY"

[roles.evaluator]
backend = "openai"
base_url = "http://evaluator.internal/v1"
api_key_env = "EVALUATOR_SECRET"

[roles.mediator]
backend = "anthropic"

[roles.judge]
backend = "openai"
base_url = "http://judge.internal/v1"
api_key = "sk-judge-inline-0000"

[deployments.psychoalign.roles.drive]
api_key = "sk-deployment-inline-1111"

[serve]
metrics_token = "metrics-secret"

[a2a.tokens]
drive = "tok-d"
evaluator = "tok-e"
mediator = "tok-m"
user = "tok-u"
"""

PARENT_ENV = {
    "PATH": "/usr/bin",
    "HOME": "/home/x",
    "DRIVE_API_KEY": "sk-drive-2222",
    "EVALUATOR_SECRET": "sk-evaluator-3333",
    "ANTHROPIC_API_KEY": "sk-ant-4444",
    "OPENAI_API_KEY": "sk-openai-5555",
    "UNRELATED_API_KEY": "sk-other-6666",
    "PSYCHOALIGN_A2A__TOKENS__DRIVE": "tok-env",
    "PSYCHOALIGN_ROLES__JUDGE__MODEL": "j",
    "PSYCHOALIGN_DEBUG": "1",
}
KEYS = ("DRIVE_API_KEY", "EVALUATOR_SECRET", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "UNRELATED_API_KEY")
NEEDS = {"drive": "DRIVE_API_KEY", "evaluator": "EVALUATOR_SECRET", "mediator": "ANTHROPIC_API_KEY", "system": None}
SECRETS = ("sk-", "tok-env", "metrics-secret")


def _settings(tmp_path: Path) -> Any:
    path = tmp_path / "p.toml"
    path.write_text(CONFIG)
    return load_settings(path, environ={})


@pytest.mark.parametrize("name", ["drive", "evaluator", "mediator", "system"])
def test_each_child_env_holds_only_its_own_roles_key(tmp_path: Path, name: str) -> None:
    env = a2a_cli.child_env(_settings(tmp_path), PARENT_ENV, name)
    held = {k for k in KEYS if k in env}
    assert held == ({NEEDS[name]} if NEEDS[name] else set()), (name, held)
    if NEEDS[name]:
        assert env[NEEDS[name]] == PARENT_ENV[NEEDS[name]]
    # Settings travel in the child's config file, never in its environment; switches stay.
    assert not any(k.startswith("PSYCHOALIGN_") and k != "PSYCHOALIGN_DEBUG" for k in env), env
    assert env["PSYCHOALIGN_DEBUG"] == "1" and env["PATH"] == "/usr/bin"


def test_each_child_config_holds_only_its_own_secrets(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    tokens = {"drive": "tok-d", "evaluator": "tok-e", "mediator": "tok-m", "user": "tok-u"}
    for role in a2a_cli.ROLES:
        data = a2a_cli.child_settings(settings, role, tokens)
        assert data["a2a"]["tokens"] == {role: tokens[role]}
        assert list(data["roles"]) == [role] and data["defaults"] == {}
        text = yaml.safe_dump(data)
        assert not any(s in text for s in SECRETS), (role, text)
        # The role still resolves to its own endpoint from the file alone.
        path = tmp_path / f"{role}.yaml"
        path.write_text(text)
        spec = load_settings(path, environ={}).model_spec(role)
        assert spec == settings.model_spec(role)
    system = a2a_cli.child_settings(settings, "system", tokens)
    assert system["a2a"]["tokens"] == tokens
    assert "sk-" not in yaml.safe_dump(system)  # no inline model key: its agents are remote


def test_up_starts_each_child_with_its_own_env_and_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`up` itself, with process start-up replaced by a recorder (no process is spawned)."""
    for var, value in PARENT_ENV.items():
        monkeypatch.setenv(var, value)
    config = tmp_path / "p.toml"
    config.write_text(CONFIG)
    started: dict[str, tuple[dict[str, str], str]] = {}

    class Recorded:
        returncode = 0

        def __init__(self, cmd: list[str], env: dict[str, str]) -> None:
            name = cmd[cmd.index("--role") + 1] if "--role" in cmd else "system"
            started[name] = (env, Path(cmd[cmd.index("--config") + 1]).read_text())

        def poll(self) -> int:
            return 0  # "exited": up reports it and stops

        def terminate(self) -> None:
            pass

        def wait(self, timeout: float) -> int:
            return 0

    monkeypatch.setattr(a2a_cli.subprocess, "Popen", Recorded)
    monkeypatch.setattr(a2a_cli, "_wait_for_card", lambda *a: None)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(ConfigError, match="agent process stopped"):
            a2a_cli.up(port_base=8100, framework="general", startup_timeout=1.0, config=config)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert set(started) == {"drive", "evaluator", "mediator", "system"}
    for name, (env, text) in started.items():
        held = {k for k in KEYS if k in env}
        assert held == ({NEEDS[name]} if NEEDS[name] else set()), (name, held)
        assert "PSYCHOALIGN_A2A__TOKENS__DRIVE" not in env
        assert not any(s in text for s in ("sk-judge", "sk-deployment")), (name, text)
        # The environment's DRIVE token overrides the file's: the DRIVE's and the system's.
        assert ("tok-env" in text) == (name in ("drive", "system")), name
    assert "PSYCHOALIGN_A2A__URLS__DRIVE" in started["system"][0]


def test_a_port_base_whose_role_ports_pass_65535_is_refused_before_any_process_starts(tmp_path: Path) -> None:
    """`up --port-base 65534` started the system agent and the DRIVE, then a child died on port
    65536 with an internal OverflowError; the flag is now checked first (roles use +1..+3)."""
    from tests.cli.test_main import cli

    config = tmp_path / "p.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\n')
    out = cli("up", "--port-base", "65534", "--config", str(config))
    assert out.returncode == 2, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--port-base" in lines[0] and "internal error" not in lines[0], out.stderr
    assert out.stdout == ""
