"""A store URL's password never reaches an error line, a log line or printed configuration,
whatever the URL's shape: one redaction (:func:`psychoalign.errors.redact_url`) for all of them."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from psychoalign.cli import main as cli_main
from psychoalign.config import load_settings
from psychoalign.errors import PsychoAlignError, redact, redact_url
from psychoalign.storage import create_engine_for

SECRET = "s3cr3tPW"

#: Store URLs a user may type by mistake, each carrying the password SECRET.
BAD_STORES = [
    f"pg//me:{SECRET}@host/db",  # scheme without its colon
    f"me:{SECRET}@host:5432/db",  # no scheme at all
    f"postgresql://me:{SECRET}@host:notaport/db",  # a port that is not a number
    f"postgresql://me:{SECRET}@127.0.0.1:1/db",  # parses, nothing listens
    f"mysql://me:{SECRET}@host/db",  # a driver we do not ship
    f"postgresql+nodriver://me:{SECRET}@host/db",  # a driver that does not exist
    f"pg//me:{SECRET}@x@host/db",  # an '@' in the password
    f"pg//me:{SECRET}/x:y@host/db",  # a '/' and a ':' in the password
    f"sqlite:////proc/me:{SECRET}@x/t.db",  # a folder that cannot be made
]

COMMANDS = [
    ["traces", "list"],
    ["traces", "show", "abc"],
    ["experiment", "status"],
    ["experiment", "cells", "abc"],
]


@pytest.mark.parametrize("store", BAD_STORES)
@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_no_password_in_any_error_line_for_a_bad_store(
    store: str, command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "p.toml"
    config.write_text(f'home = "{tmp_path}"\n')
    args = [*command, "--config", str(config), "--store", store]
    result = CliRunner().invoke(cli_main.app, args)
    assert result.exit_code != 0, result.output
    assert isinstance(result.exception, PsychoAlignError), repr(result.exception)  # one line, not a bug
    assert SECRET not in result.output
    assert SECRET not in str(result.exception) and SECRET not in (result.exception.detail or "")
    # The line the console script prints for it (what `psychoalign ...` shows a user).
    monkeypatch.setattr(sys, "argv", ["psychoalign", *args])
    with pytest.raises(SystemExit):
        cli_main.run()
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "store" in err, err
    assert SECRET not in err, err


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (f"postgresql://me:{SECRET}@h/db", "postgresql://[redacted]@h/db"),
        (f"pg//me:{SECRET}@h/db", "pg//[redacted]@h/db"),
        (f"me:{SECRET}@h:5432/db", "[redacted]@h:5432/db"),
        (f"'me:{SECRET}@x@h/db' is bad", "'[redacted]@h/db' is bad"),
        (f"url=http://me:{SECRET}/a:b@h/v1", "url=http://[redacted]@h/v1"),
        (f"https://m/d?token={SECRET}&v=2", "https://m/d?token=[redacted]&v=2"),  # a signed link
        (f"https://m/d?X-Amz-Signature={SECRET}: HTTP 403", "https://m/d?X-Amz-Signature=[redacted]: HTTP 403"),
        ("postgresql://h/db?sslmode=require", "postgresql://h/db?sslmode=require"),  # no credential in it
        ("postgresql://me@h/db", "postgresql://me@h/db"),  # no password: nothing to hide
        ("sqlite:///tmp/store.db at 12:30", "sqlite:///tmp/store.db at 12:30"),
        ("missing bearer token", "missing bearer token"),
        # STAR target labels are names to read and type, not user:password@host
        ("targets: psychoalign:general@1.0#0123456789ab.", "targets: psychoalign:general@1.0#0123456789ab."),
        (
            "'psychoalign:general=psychoalign:general@1.0#0123456789ab'",
            "'psychoalign:general=psychoalign:general@1.0#0123456789ab'",
        ),
        ("(model:scripted:script@0123456789ab)", "(model:scripted:script@0123456789ab)"),
        (f"postgresql://psychoalign:{SECRET}@db/x", "postgresql://[redacted]@db/x"),  # a user named psychoalign
        (f"psychoalign:{SECRET}@1.0#0123456789abc", "[redacted]@1.0#0123456789abc"),  # not a label's digest
    ],
)
def test_redact_url_hides_the_credentials_of_any_url_shape(text: str, shown: str) -> None:
    assert redact_url(text) == shown
    assert redact_url(shown) == shown  # a redacted URL stays as it is
    assert SECRET not in redact(text)  # the general redaction uses it


def test_config_show_and_logs_hide_store_and_endpoint_passwords(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = tmp_path / "p.toml"
    config.write_text(f'[roles.drive]\nbackend = "openai"\nbase_url = "http://me:{SECRET}@h/v1"\n')
    settings = load_settings(config, environ={"PSYCHOALIGN_STORE_URL": f"pg//me:{SECRET}@h/db"})
    masked = str(settings.masked())
    assert SECRET not in masked and "pg//[redacted]@h/db" in masked and "http://[redacted]@h/v1" in masked
    with caplog.at_level(logging.DEBUG), pytest.raises(PsychoAlignError) as info:
        create_engine_for(f"me:{SECRET}@h/db")
    assert SECRET not in str(info.value) and SECRET not in caplog.text
