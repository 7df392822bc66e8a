"""Bad input at the edges: one clean line naming what, where and the fix; never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from psychoalign.config import Settings
from psychoalign.errors import ConfigError
from psychoalign.negotiation import Negotiator
from psychoalign.negotiation.params import parse_params
from psychoalign.textio import normalise_text
from psychoalign.traces import SQLTraceStore, TraceStatus
from tests.cli.test_negotiate import write_config
from tests.scenario import World, proposals

LATIN1 = "caf\xe9 = 1\n".encode("latin-1")


def _run(*args: str, stdin: bytes | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "psychoalign", *args],
        input=stdin,
        capture_output=True,
        env={**os.environ, **(env or {})},
        timeout=120,
        check=False,
    )
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def _clean_error(out: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert out.returncode != 0
    assert "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith("error: "), out.stderr
    for needle in needles:
        assert needle in out.stderr, (needle, out.stderr)


def test_normalise_text_removes_nul_controls_and_surrogates() -> None:
    assert normalise_text("a\x00b\x07c\td\ne") == "abc\td\ne"
    assert normalise_text("x\udcff") == "x\ufffd"
    assert normalise_text("e\u0301") == "\xe9"


async def test_nul_and_surrogates_in_a_request_never_break_the_store(tmp_path: Path) -> None:
    store = SQLTraceStore(f"sqlite:///{tmp_path / 't.db'}")
    world = World([proposals(("Boil it.", 0.9))])
    trace = await world.negotiator(store=store).negotiate("egg\x00 \udcff?")
    assert trace.status is TraceStatus.COMPLETED
    stored = await store.get(trace.id)
    assert stored is not None and stored.request == "egg \ufffd?" and stored.metadata["request_normalised"]
    await store.close()


class BrokenStore(SQLTraceStore):
    async def finish(self, trace: object) -> None:
        from sqlalchemy.exc import IntegrityError

        raise IntegrityError("INSERT INTO psychoalign_traces VALUES (?)", ("SECRET-PARAM",), Exception("disk says no"))


async def test_a_store_failure_gives_a_failed_trace_and_a_clean_message(tmp_path: Path) -> None:
    store = BrokenStore(f"sqlite:///{tmp_path / 't.db'}")
    trace = await World([proposals(("DRIVE TEXT", 0.9))]).negotiator(store=store).negotiate("q")
    assert trace.status is TraceStatus.FAILED
    assert trace.error == "could not store the trace: Exception: disk says no (check store_url)"
    assert "INSERT" not in trace.error and "SECRET-PARAM" not in trace.error
    assert "DRIVE TEXT" not in trace.response
    await store.close()


@pytest.mark.postgres
async def test_nul_in_a_request_with_postgresql() -> None:
    from tests.helpers import PG_URL, pg_schema
    from tests.traces.test_store import _pg_available

    if not _pg_available():
        pytest.fail("PostgreSQL is expected at 127.0.0.1:5432 on this machine kind")
    async with pg_schema("t") as connect_args:
        store = SQLTraceStore(PG_URL, connect_args=connect_args)
        try:
            trace = await Negotiator(
                Settings(), models=World([proposals(("ok", 0.9))]).models(), store=store
            ).negotiate("a\x00b")
            assert trace.status is TraceStatus.COMPLETED, trace.error
            assert (await store.get(trace.id)) is not None
        finally:
            await store.close()


def test_invalid_utf8_on_stdin_is_one_line(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    out = _run("negotiate", "--config", str(config), "--no-store", "-", stdin=b"caf\xe9?")
    _clean_error(out, "standard input is not UTF-8", "0xe9")


def test_debug_env_does_not_break_settings(tmp_path: Path) -> None:
    out = _run("config", "show", "--json", env={"PSYCHOALIGN_DEBUG": "1"})
    assert out.returncode == 0, out.stderr
    assert "debug" not in json.loads(out.stdout)


@pytest.mark.parametrize("kind", ["config", "framework", "policy", "participants"])
def test_non_utf8_files_give_one_line_errors(tmp_path: Path, kind: str) -> None:
    bad = tmp_path / ("bad.toml" if kind == "config" else "bad.yaml")
    bad.write_bytes(LATIN1)
    args = {
        "config": ["config", "show", "--config", str(bad)],
        "framework": ["negotiate", "-f", str(bad), "--no-store", "hi"],
        "policy": ["star", "policy", "validate", str(bad)],
        "participants": ["star", "participants", "import", str(bad)],
    }[kind]
    out = _run(*args)
    _clean_error(out, str(bad), "not UTF-8", "save it as UTF-8")


def test_binary_framework_file(tmp_path: Path) -> None:
    blob = tmp_path / "model.bin"
    blob.write_bytes(bytes(range(256)))
    _clean_error(_run("negotiate", "-f", str(blob), "--no-store", "hi"), str(blob), "not UTF-8")


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["-k", "0"], ["--rounds/-k 0", "k = 0", "integer >= 1 and <= 20", "use --rounds 5"]),
        (["--tau", "2"], ["--tau 2.0", "tau = 2.0", ">= 0 and <= 1", "use --tau 0.6"]),
    ],
)
def test_invalid_flags_name_flag_field_range_and_fix(tmp_path: Path, args: list[str], needles: list[str]) -> None:
    config = write_config(tmp_path)
    _clean_error(_run("negotiate", "--config", str(config), "--no-store", *args, "hi"), *needles)


@pytest.mark.parametrize(
    ("table", "needles"),
    [
        ('k = "five"', ["[negotiation]", "k = 'five'", "integer >= 1 and <= 20", "e.g. k = 5"]),
        ("kk = 3", ["unknown negotiation parameter 'kk'", "known: k, epsilon"]),
    ],
)
def test_bad_negotiation_table_fails_config_show_and_negotiate(tmp_path: Path, table: str, needles: list[str]) -> None:
    config = write_config(tmp_path)
    config.write_text(config.read_text() + f"\n[negotiation]\n{table}\n")
    _clean_error(_run("config", "show", "--config", str(config)), str(config), *needles)
    _clean_error(_run("negotiate", "--config", str(config), "--no-store", "hi"), str(config), *needles)


def test_parse_params_weights_rule() -> None:
    with pytest.raises(ConfigError, match="alpha \\+ beta \\+ gamma must be positive"):
        parse_params({"alpha": 0, "beta": 0, "gamma": 0}, where="[negotiation]")


async def test_undecodable_bytes_in_a_framework_path_give_one_line_and_a_storable_trace(tmp_path: Path) -> None:
    """A file name that is not UTF-8 (Python hands it over with lone surrogates) used to make the
    failed trace unstorable ('surrogates not allowed') and the error line unprintable. The CLI now
    refuses the framework before a trace exists (one line, exit 2, nothing stored); a library
    caller passing the name still gets a failed trace that the store keeps."""
    config = write_config(tmp_path)
    store = tmp_path / "t.db"
    name = os.fsdecode(b"/nonexistent/\xff\xfe.yaml")
    out = _run("negotiate", "--config", str(config), "--store", f"sqlite:///{store}", "-f", name, "hi")
    _clean_error(out, "cannot read framework file /nonexistent/", "check the path")
    assert out.returncode == 2 and "Serialization" not in out.stderr and "surrogates" not in out.stderr
    listed = _run("traces", "list", "--config", str(config), "--store", f"sqlite:///{store}", "--json")
    assert json.loads(listed.stdout or "[]") == []
    traces = SQLTraceStore(f"sqlite:///{store}")
    trace = await World([proposals(("Boil it.", 0.9))]).negotiator(store=traces).negotiate("hi", framework=name)
    assert trace.status is TraceStatus.FAILED and "cannot read framework file /nonexistent/" in (trace.error or "")
    stored = await traces.get(trace.id)
    assert stored is not None and stored.status is TraceStatus.FAILED
    await traces.close()


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["negotiate", "--store", "sqlite:////proc/no/such/t.db", "hi"], ["/proc/no/such", "store_url (or --store)"]),
        (["traces", "export", "--out", "/proc/no/such/out.jsonl"], ["--out /proc/no/such/out.jsonl", "writable"]),
        (["negotiate", "--store", "nosuchdriver://x", "hi"], ["cannot open store", "check store_url"]),
        # a bare word: the error said only "cannot open store (unparseable URL): ArgumentError"
        (["traces", "list", "--store", "notaurl"], ["'notaurl' is not a database URL", "sqlite:///"]),
        (["traces", "list", "--store", "pg//me:s3cret@host/db"], ["is not a database URL", "pg//[redacted]@host"]),
    ],
)
def test_unusable_paths_and_urls_name_the_flag(tmp_path: Path, args: list[str], needles: list[str]) -> None:
    config = write_config(tmp_path)
    head = 2 if args[0] == "traces" else 1  # the (sub)command, then --config, then the rest
    _clean_error(_run(*args[:head], "--config", str(config), *args[head:]), *needles)


@pytest.mark.parametrize(
    ("table", "command", "needles"),
    [
        (
            '[deployments.psychoalign]\nframework = "genral"\n',
            ["config", "show"],
            ["deployments.psychoalign.framework"],
        ),
        (
            '[deployments.psychoalign]\nallowed_frameworks = ["/nonexistent/weak.yaml"]\n',
            ["serve-a2a", "--insecure"],
            ["deployments.psychoalign.allowed_frameworks", "/nonexistent/weak.yaml"],
        ),
        ('[deployments.psychoalign]\nframework = "nope"\n', ["serve"], ["deployments.psychoalign.framework"]),
        (
            '[deployments.psychoalign]\napi_keys = ["pa-the-key-itself"]\n',
            ["config", "show"],
            ["deployments.psychoalign.api_keys", "not a SHA-256 hex digest", "serve-key"],
        ),
        ("", ["serve-a2a", "--insecure", "-f", "genral"], ["unknown framework 'genral'"]),
    ],
)
def test_deployment_mistakes_fail_at_start_up_not_per_request(
    tmp_path: Path, table: str, command: list[str], needles: list[str]
) -> None:
    """A typo in a deployment's frameworks, or a key where its digest belongs, used to start the
    server (every request then failed) or pass `config show`."""
    config = write_config(tmp_path)
    config.write_text(config.read_text() + "\n" + table)
    port = ["--port", "1"] if command[0].startswith("serve") else []  # never reached: it fails first
    _clean_error(_run(*command, "--config", str(config), *port), *needles)
