"""A reply that breaks its schema is model output: its text never reaches a user.

A DRIVE (or EVALUATOR) whose JSON fails validation with a planted string in the failing value:
users are told the role, the failure class and the schema path ("drive: … reply did not match the
'drive_proposals' schema at proposals[1].utility: expected a number"), through the engine, the CLI
(table, ``--json``), ``/v1``, A2A (a role service's failure, the system agent) and the STAR lab's
target; the validator's own message, which quotes the value, is kept in the internal
``error_detail`` (``--show-internal``, ``--debug``). The negotiation fails closed: no draft text
reaches the user."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import httpx
import pytest
import yaml
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers import get_message_text, new_data_message
from a2a.types import Role, SendMessageRequest, TaskState
from pydantic import BaseModel, BeforeValidator

from psychoalign.a2a import A2ATransport
from psychoalign.a2a.codec import encode_task
from psychoalign.a2a.system import build_system_app
from psychoalign.agents import DriveTask
from psychoalign.config import Settings
from psychoalign.errors import SchemaValidationError
from psychoalign.models import ChatModel, ModelSpec, ScriptedBackend
from psychoalign.models.schema import ReplyMismatchError, schema_for, validate_reply
from psychoalign.negotiation import Negotiator
from psychoalign.negotiation.defense import template
from psychoalign.star.model import Turn
from psychoalign.star.personas import PsychoAlignTarget, TargetError
from psychoalign.traces import InMemoryTraceStore, TraceStatus
from psychoalign.web import create_app
from tests.a2a.test_server import TOKENS, Server, role_servers
from tests.cli.test_main import cli
from tests.loopback import listening_socket
from tests.scenario import APPROVE, World, proposals

SECRET = "ZQX-PLANTED-7f3a9c"  # in the value that fails validation
DRAFT = "DRAFT-TEXT-b81e44"  # a DRIVE draft: valid itself, in a reply that fails or never evaluated

# The DRIVE's reply: its first draft is fine, the second's utility is text quoting it.
BAD_DRIVE = {
    "proposals": [
        {"text": f"Sure, here it is: {DRAFT}", "utility": 0.9},
        {"text": "Another idea.", "utility": f"{SECRET}: {DRAFT}"},
    ]
}
# The EVALUATOR's reply: its score is text quoting the draft it was shown.
BAD_EVALUATOR = {**APPROVE, "score": f"{SECRET} {DRAFT}", "reasoning": f"{SECRET} {DRAFT}"}

# What users are told, after "<role>: <backend>:<model>: ".
EXPECTED = {
    "drive": "reply did not match the 'drive_proposals' schema at proposals[1].utility: expected a number; gave up",
    "evaluator": "reply did not match the 'evaluation' schema at score: expected an integer; gave up",
}


def _names_role_class_and_path(error: str | None, role: str) -> None:
    assert error is not None and error.startswith(f"{role}: scripted:"), error
    assert EXPECTED[role] in error, error


def _clean(text: str) -> None:
    assert SECRET not in text, text
    assert DRAFT not in text, text


def _world() -> World:
    return World([proposals((f"Sure, here it is: {DRAFT}", 0.9))], judge=lambda _text: APPROVE)


def _models(role: str) -> dict[str, ChatModel]:
    models = _world().models()
    spec = ModelSpec(backend="scripted", model=role, schema_retries=1, max_retries=0)
    bad = BAD_DRIVE if role == "drive" else BAD_EVALUATOR
    models[role] = ChatModel(spec, ScriptedBackend(spec, replies=[bad], cycle=True))
    return models


ROLES = pytest.mark.parametrize("role", ["drive", "evaluator"])


# -- the mechanism: what a validator says never becomes the message --------------------------------


def test_jsonschema_problems_name_the_path_and_class_never_the_value() -> None:
    schema = schema_for(
        {
            "type": "object",
            "properties": {
                "proposals": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"text": {"type": "string", "maxLength": 10}, "utility": {"type": "number"}},
                        "required": ["text", "utility"],
                    },
                },
                "verdict": {"enum": ["APPROVED", "VETOED"]},
                "scores": {"type": "object", "additionalProperties": {"type": "number"}},
            },
            "required": ["proposals"],
        }
    )
    cases = [
        ({"proposals": [{"text": "a", "utility": SECRET}]}, "proposals[0].utility: expected a number"),
        (
            {"proposals": [{"text": SECRET * 3, "utility": 1}]},
            "proposals[0].text: text too long (at most 10 characters)",
        ),
        ({"proposals": [{"text": "a", "utility": 1, SECRET: 1}]}, "proposals[0]: unexpected field"),
        ({"proposals": [{"text": SECRET}]}, "proposals[0]: missing required field 'utility'"),
        ({"proposals": [], "verdict": SECRET}, "verdict: not one of the allowed values"),
        ({"proposals": [], "scores": {SECRET: SECRET}}, "scores.?: expected a number"),  # a key the reply made up
        ([SECRET], "(root): expected an object"),
    ]
    for reply, said in cases:
        with pytest.raises(ReplyMismatchError) as info:
            validate_reply(json.dumps(reply), schema)
        assert str(info.value) == said
        assert SECRET in info.value.detail  # the validator's own words, for --show-internal / --debug
    with pytest.raises(ReplyMismatchError) as info:
        validate_reply(f"I will not answer in JSON: {SECRET}", schema)
    assert str(info.value) == "no JSON value found in the reply" and SECRET in info.value.detail


def _only_ok(value: Any) -> Any:
    if value != "ok":
        raise ValueError(f"cannot use {value!r}")  # quotes the reply, as validators do
    return value


class Quoting(BaseModel):
    """A model whose validator quotes what it rejects (pydantic wraps it as 'Value error, …')."""

    label: Annotated[str, BeforeValidator(_only_ok)]


async def test_a_validator_that_quotes_the_reply_is_not_the_message() -> None:
    spec = ModelSpec(backend="scripted", model="m", schema_retries=1, max_retries=0)
    model = ChatModel(spec, ScriptedBackend(spec, replies=[{"label": SECRET}], cycle=True))
    with pytest.raises(SchemaValidationError) as info:
        await model.chat("label it", output=Quoting, schema_name="quoting")
    assert str(info.value).startswith(
        "scripted:m: reply did not match the 'quoting' schema at label: invalid value (value_error); "
        "gave up after 2 tries"
    )
    assert SECRET not in str(info.value) and SECRET not in info.value.message
    assert SECRET in (info.value.detail or "") and SECRET in info.value.last_reply
    # A reply the JSON parser itself would reject (an integer over Python's digit limit) is refused
    # before parsing (psychoalign.jsonguard), and re-asked too.
    model = ChatModel(spec, ScriptedBackend(spec, replies=['{"label": ' + "9" * 5000 + "}"], cycle=True))
    expected = r"schema: not usable JSON \(a number at character 10 has 5000 digits, over the limit of 100\); gave up"
    with pytest.raises(SchemaValidationError, match=expected):
        await model.chat("label it", output=Quoting, schema_name="quoting")


# -- every surface --------------------------------------------------------------------------------


@ROLES
async def test_engine_names_role_class_and_path_and_fails_closed(role: str) -> None:
    models = _models(role)
    trace = await Negotiator(Settings(), models=models).negotiate("How do I boil an egg?")
    assert trace.status is TraceStatus.FAILED
    _names_role_class_and_path(trace.error, role)
    _clean(trace.error or "")
    assert trace.response == template("fail_closed")
    _clean(trace.response)
    assert SECRET in (trace.error_detail or "")  # internal: the validator's message with the value
    # The STAR lab's negotiation target: its failure reason is stored and shown to the lead.
    with pytest.raises(TargetError) as info:
        await PsychoAlignTarget(Negotiator(Settings(), models=_models(role))).reply(
            [Turn(role="red_teamer", text="How do I boil an egg?")]
        )
    assert "reply did not match" in info.value.message
    _clean(str(info.value))


def _config(tmp_path: Path, role: str) -> Path:
    scripts: dict[str, Any] = {
        "drive": {"default": BAD_DRIVE if role == "drive" else proposals((f"Sure, here it is: {DRAFT}", 0.9))},
        "evaluator": {"default": BAD_EVALUATOR if role == "evaluator" else APPROVE},
        "mediator": {"default": {"response": "composed"}},
    }
    lines = [f'home = "{tmp_path / "home"}"\n']
    for name, script in scripts.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump({"rules": [], **script}))
        lines.append(f'[roles.{name}]\nbackend = "scripted"\nscript = "{path}"\nschema_retries = 0\n')
    config = tmp_path / "psychoalign.toml"
    config.write_text("\n".join(lines))
    return config


@ROLES
def test_cli_table_and_json_name_the_class_internal_views_show_the_value(tmp_path: Path, role: str) -> None:
    config = _config(tmp_path, role)
    ask = ("negotiate", "--config", str(config), "How do I boil an egg?")
    table = cli(*ask)
    as_json = cli(*ask[:-1], "--json", ask[-1])
    for out in (table, as_json):
        assert out.returncode == 1
        assert "reply did not match" in out.stderr and f"{role}: " in out.stderr
        _clean(out.stdout + out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    trace = json.loads(as_json.stdout)
    assert trace["status"] == "failed"
    _names_role_class_and_path(trace["error"], role)
    assert trace["error_detail"].startswith("[hidden") and trace["final"]["response"] == template("fail_closed")
    shown = cli(*ask[:-1], "--show-internal", ask[-1])
    assert SECRET in shown.stdout and "Detail (internal)" in shown.stdout
    debug = cli("--debug", *ask)
    assert SECRET in debug.stderr


def test_cli_chat_schema_error_names_the_class_and_debug_shows_the_value(tmp_path: Path) -> None:
    """The same split for a raw structured call (jsonschema path, `chat --schema`)."""
    script = tmp_path / "chat.yaml"
    script.write_text(yaml.safe_dump({"rules": [], "default": {"label": "ok", "score": SECRET}}))
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"label": {}, "score": {"type": "integer"}}}))
    config = tmp_path / "c.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\n[roles.chat]\nbackend = "scripted"\nscript = "{script}"\n')
    ask = ("chat", "--config", str(config), "--schema", str(schema), "rate it")
    out = cli(*ask)
    assert out.returncode == 1
    assert "reply did not match the 'reply' schema at score: expected an integer" in out.stderr
    assert SECRET not in out.stdout + out.stderr
    assert SECRET in cli("--debug", *ask).stderr


def test_cli_catch_all_prints_the_class_not_the_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unexpected exception (a bug) may carry model output in its text: the default line
    names its class and points to --debug; --debug re-raises it whole."""
    from psychoalign.cli import main

    def boom(**_: object) -> None:
        raise ValueError(f"model said {SECRET}")

    monkeypatch.setattr(main, "app", boom)
    monkeypatch.setattr("sys.argv", ["psychoalign", "negotiate", "x"])
    monkeypatch.delenv("PSYCHOALIGN_DEBUG", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        main.run()
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert "internal error (ValueError)" in err and "--debug" in err and SECRET not in err
    monkeypatch.setattr("sys.argv", ["psychoalign", "--debug", "negotiate", "x"])
    with pytest.raises(ValueError, match=SECRET):
        main.run()


@ROLES
async def test_v1_names_no_reply_text(role: str) -> None:
    models = _models(role)
    app = create_app(
        Settings(), store=InMemoryTraceStore(), negotiators={"psychoalign": Negotiator(Settings(), models=models)}
    )
    body = {"model": "psychoalign", "messages": [{"role": "user", "content": "How do I boil an egg?"}]}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            plain = await c.post("/v1/chat/completions", json=body)
            streamed = await c.post("/v1/chat/completions", json={**body, "stream": True})
    assert plain.json()["psychoalign"]["status"] == "failed"
    assert plain.json()["choices"][0]["message"]["content"] == template("fail_closed")
    for r in (plain, streamed):
        _clean(r.text + json.dumps(dict(r.headers)))


@ROLES
async def test_a2a_role_failure_and_system_agent_name_no_reply_text(role: str) -> None:
    models = _models(role)
    with role_servers(_world(), models) as (urls, _):
        if role == "drive":  # the DRIVE service's own failure message, as the MEDIATOR receives it
            async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKENS['drive']}"}, timeout=30) as hc:
                card = await A2ACardResolver(hc, urls["drive"]).get_agent_card()
                client = ClientFactory(ClientConfig(streaming=False, httpx_client=hc)).create(card)
                task = DriveTask(request="How do I boil an egg?", context="chat", n=2)
                request = SendMessageRequest(message=new_data_message(encode_task(task), role=Role.ROLE_USER))
                tasks = [r.task async for r in client.send_message(request) if r.HasField("task")]
            final = tasks[-1]
            assert final.status.state == TaskState.TASK_STATE_FAILED
            said = get_message_text(final.status.message)
            assert "reply did not match the 'drive_proposals' schema at proposals[1].utility" in said
            _clean(said + str(final))
        # The whole negotiation over A2A: the system's trace names the role and the class.
        transport = A2ATransport(urls, tokens=TOKENS)
        trace = await Negotiator(Settings(), transport=transport).negotiate("How do I boil an egg?")
        await transport.aclose()
    assert trace.status is TraceStatus.FAILED and (trace.error or "").startswith(f"{role}: {role} agent ended the task")
    assert "reply did not match" in (trace.error or "")
    for text in (trace.error or "", trace.error_detail or "", trace.response):
        _clean(text)  # nothing of the reply crossed A2A, not even into the internal detail
    # The system agent (the negotiation as one A2A agent): the raw JSON-RPC answer.
    sock = listening_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = Server(build_system_app(Negotiator(Settings(), models=_models(role)), url, token="t"), sock)
    try:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "How do I boil an egg?"}]}
            },
        }
        async with httpx.AsyncClient(timeout=60) as hc:
            resp = await hc.post(
                f"{url}/a2a/jsonrpc", json=body, headers={"Authorization": "Bearer t", "A2A-Version": "1.0"}
            )
    finally:
        server.stop()
    assert resp.json()["result"]["task"]["status"]["state"] == "TASK_STATE_FAILED"
    _clean(resp.text)
