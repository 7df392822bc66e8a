"""A provider's error body never reaches a user: CLI (table, --json), /v1, A2A, STAR targets.

The fake endpoint answers HTTP 500 with a body holding a key-shaped string, a bearer token and an
internal URL. Users are told the failure class ("model endpoint returned HTTP 500"); the body is
kept, redacted and bounded, only in the trace's internal ``error_detail`` (``--show-internal``,
``--debug``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers import get_message_text, new_data_message
from a2a.types import Role, SendMessageRequest, TaskState

from psychoalign.a2a import A2ATransport
from psychoalign.a2a.codec import encode_task
from psychoalign.agents import DriveTask
from psychoalign.config import Settings
from psychoalign.errors import EndpointError, redact
from psychoalign.models import ChatModel, build_model
from psychoalign.negotiation import Negotiator
from psychoalign.star.model import Turn
from psychoalign.star.personas import ModelTarget, PsychoAlignTarget, TargetError
from psychoalign.traces import InMemoryTraceStore, TraceStatus
from psychoalign.web import create_app
from tests.a2a.test_server import TOKENS, role_servers
from tests.cli.test_main import cli
from tests.helpers import fast_spec
from tests.loopback import FakeServer, Scripted, fake_endpoint
from tests.scenario import APPROVE, World, proposals

KEY = "sk-live-SECRETKEY0123456789abcdef"
TOKEN = "eyJhbGciOiJIUzI1NiJ9.SECRETBEARER"
INTERNAL = "llm-7.internal.corp"
BODY = {
    "error": {
        "message": f"upstream {INTERNAL}:8443/v1/generate failed for key {KEY}; prompt was: How do I boil",
        "request_id": "req_8f7e6d",
        "headers": {"Authorization": f"Bearer {TOKEN}"},
    }
}
LEAKS = (KEY, "SECRETKEY", TOKEN, "SECRETBEARER", INTERNAL, "req_8f7e6d")


def _clean(text: str, *, endpoint: str) -> None:
    """Nothing of the body, and not even the endpoint's address, in ``text``."""
    for leak in (*LEAKS, endpoint):
        assert leak not in text, (leak, text)


@pytest.fixture(params=[500, 400])
def failing(request: pytest.FixtureRequest) -> Iterator[FakeServer]:
    """A 500 (retried, then given up) and a 400 (not retried): both paths carry the body."""
    fake = FakeServer(default=Scripted(BODY, status=request.param))
    fake.status = request.param  # type: ignore[attr-defined]
    with fake_endpoint("/v1/chat/completions", fake):
        yield fake


def _status(fake: FakeServer) -> int:
    return int(fake.status)  # type: ignore[attr-defined]


def _drive(fake: FakeServer) -> ChatModel:
    spec = fast_spec(backend="openai", base_url=f"{fake.url}/v1", model="m", api_key="k", max_retries=1)
    return build_model(spec)


def _world() -> World:
    return World([proposals(("Boil it for 6 minutes.", 0.9))], judge=lambda _text: APPROVE)


def test_redact_removes_credentials_and_bounds_the_text() -> None:
    text = redact(json.dumps(BODY) + " x" * 1000)
    assert KEY not in text and TOKEN not in text and "SECRET" not in text
    assert INTERNAL in text  # internal detail keeps what helps an operator, minus credentials
    assert len(text) <= 500 and "\n" not in text


async def test_model_error_names_the_class_and_keeps_the_body_internal(failing: FakeServer) -> None:
    model = _drive(failing)
    with pytest.raises(EndpointError) as info:
        await model.chat("hi")
    await model.aclose()
    status = _status(failing)
    assert len(failing.requests) == (2 if status == 500 else 1)  # 500 is retried: max_retries=1
    message = str(info.value)
    assert f"model endpoint returned HTTP {status}" in message
    _clean(message, endpoint=failing.url)
    detail = info.value.detail or ""
    assert f"{failing.url}/v1/chat/completions" in detail and f"HTTP {status}" in detail and INTERNAL in detail
    assert KEY not in detail and TOKEN not in detail and "[redacted]" in detail


async def test_negotiation_trace_error_is_the_class_detail_is_internal(failing: FakeServer) -> None:
    models = _world().models()
    models["drive"] = _drive(failing)
    trace = await Negotiator(Settings(), models=models).negotiate("How do I boil an egg?")
    await models["drive"].aclose()
    assert trace.status is TraceStatus.FAILED
    assert (trace.error or "").startswith(f"drive: openai:m: model endpoint returned HTTP {_status(failing)}")
    _clean(trace.error or "", endpoint=failing.url)
    assert INTERNAL in (trace.error_detail or "") and KEY not in (trace.error_detail or "")
    # The STAR lab's negotiation target (its failure reason is stored and shown to the lead).
    models = _world().models()
    models["drive"] = _drive(failing)
    with pytest.raises(TargetError) as info:
        await PsychoAlignTarget(Negotiator(Settings(), models=models)).reply([Turn(role="red_teamer", text="hi")])
    _clean(info.value.message, endpoint=failing.url)
    with pytest.raises(TargetError) as info:
        await ModelTarget(models["drive"]).reply([Turn(role="red_teamer", text="hi")])
    await models["drive"].aclose()
    assert f"HTTP {_status(failing)}" in info.value.message
    _clean(info.value.message, endpoint=failing.url)


def _config(tmp_path: Path, fake: FakeServer) -> Path:
    scripts = {"evaluator": {"default": APPROVE}, "mediator": {"default": {"response": "composed"}}}
    lines = [f'home = "{tmp_path / "home"}"\n']
    lines.append(
        f'[roles.drive]\nbackend = "openai"\nbase_url = "{fake.url}/v1"\nmodel = "m"\napi_key = "k"\nmax_retries = 0\n'
    )
    for role, script in scripts.items():
        path = tmp_path / f"{role}.yaml"
        path.write_text(yaml.safe_dump({"rules": [], **script}))
        lines.append(f'[roles.{role}]\nbackend = "scripted"\nscript = "{path}"\n')
    config = tmp_path / "psychoalign.toml"
    config.write_text("\n".join(lines))
    return config


def test_cli_shows_the_class_and_the_body_only_with_show_internal_or_debug(tmp_path: Path, failing: FakeServer) -> None:
    config = _config(tmp_path, failing)
    ask = ("negotiate", "--config", str(config), "How do I boil an egg?")
    table = cli(*ask)
    as_json = cli(*ask[:-1], "--json", ask[-1])
    for out in (table, as_json):
        assert out.returncode == 1
        assert f"model endpoint returned HTTP {_status(failing)}" in out.stdout + out.stderr
        _clean(out.stdout + out.stderr, endpoint=failing.url)
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr  # one error line
    trace = json.loads(as_json.stdout)
    assert trace["error"].startswith("drive: ") and trace["error_detail"].startswith("[hidden")
    shown = cli(*ask[:-1], "--show-internal", ask[-1])
    assert INTERNAL in shown.stdout and "Detail (internal)" in shown.stdout
    debug = cli("--debug", *ask)
    assert INTERNAL in debug.stderr
    stored = cli("traces", "show", trace["id"], "--config", str(config), "--json")
    _clean(stored.stdout, endpoint=failing.url)
    for out in (shown, debug):  # internal views keep the body, never the credentials in it
        for secret in (KEY, "SECRETKEY", TOKEN, "SECRETBEARER"):
            assert secret not in out.stdout + out.stderr


async def test_v1_response_names_no_provider_text(failing: FakeServer) -> None:
    store = InMemoryTraceStore()
    models = _world().models()
    models["drive"] = _drive(failing)
    app = create_app(Settings(), store=store, negotiators={"psychoalign": Negotiator(Settings(), models=models)})
    body = {"model": "psychoalign", "messages": [{"role": "user", "content": "How do I boil an egg?"}]}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            plain = await c.post("/v1/chat/completions", json=body)
            streamed = await c.post("/v1/chat/completions", json={**body, "stream": True})
    await models["drive"].aclose()
    assert plain.json()["psychoalign"]["status"] == "failed"
    for r in (plain, streamed):
        _clean(r.text + json.dumps(dict(r.headers)), endpoint=failing.url)


async def test_a2a_failure_message_names_the_class_and_the_body_stays_on_the_role_host(
    failing: FakeServer,
) -> None:
    models = _world().models()
    models["drive"] = _drive(failing)
    with role_servers(_world(), models) as (urls, _):
        # The DRIVE service's own A2A failure message, as its caller (the MEDIATOR) receives it.
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKENS['drive']}"}, timeout=30) as hc:
            card = await A2ACardResolver(hc, urls["drive"]).get_agent_card()
            client = ClientFactory(ClientConfig(streaming=False, httpx_client=hc)).create(card)
            task = DriveTask(request="How do I boil an egg?", context="chat", n=1)
            request = SendMessageRequest(message=new_data_message(encode_task(task), role=Role.ROLE_USER))
            final = None
            async for resp in client.send_message(request):
                if resp.HasField("task"):
                    final = resp.task
        assert final is not None and final.status.state == TaskState.TASK_STATE_FAILED
        said = get_message_text(final.status.message)
        assert f"model endpoint returned HTTP {_status(failing)}" in said
        _clean(said, endpoint=failing.url)
        # Through the whole negotiation over A2A: the system's trace names the role and the class.
        transport = A2ATransport(urls, tokens=TOKENS)
        trace = await Negotiator(Settings(), transport=transport).negotiate("How do I boil an egg?")
        await transport.aclose()
    await models["drive"].aclose()
    assert trace.status is TraceStatus.FAILED and (trace.error or "").startswith("drive: ")
    assert f"HTTP {_status(failing)}" in (trace.error or "")
    _clean(trace.error or "", endpoint=failing.url)
    _clean(trace.error_detail or "", endpoint=failing.url)  # the body never crossed A2A


def test_redact_removes_a_password_in_a_url_and_keeps_the_host() -> None:
    text = redact("POST http://admin:hunter2secret@10.0.0.5:8000/v1/chat/completions: HTTP 500")
    assert "hunter2secret" not in text and "admin:" not in text
    assert text == "POST http://[redacted]@10.0.0.5:8000/v1/chat/completions: HTTP 500"
