"""A2A: real servers on loopback, the official a2a-sdk client, auth, the bus invariant over the network."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers import get_data_parts, new_data_message
from a2a.types import GetTaskRequest, ListTasksRequest, Role, SendMessageRequest, TaskState

from psychoalign.a2a import A2ATransport, build_role_app, remote_transport
from psychoalign.a2a.codec import encode_task
from psychoalign.agents import DriveTask
from psychoalign.config import Settings
from psychoalign.errors import ConfigError
from psychoalign.models import ChatModel, ChatRequest, ModelSpec, ScriptedBackend
from psychoalign.negotiation import Negotiator
from psychoalign.negotiation.defense import template
from psychoalign.traces import TraceStatus
from tests.cli.test_main import cli
from tests.helpers import json_keys
from tests.loopback import ThreadedServer, listening_socket
from tests.scenario import World, evaluation, proposals, scripted_crisis

TOKENS = {"mediator": "tok-mediator", "drive": "tok-drive", "evaluator": "tok-evaluator"}


class Server(ThreadedServer):
    """An A2A app on loopback (see :class:`~tests.loopback.ThreadedServer`)."""


@contextmanager
def role_servers(
    world: World, models: dict[str, ChatModel] | None = None
) -> Iterator[tuple[dict[str, str], dict[str, Server]]]:
    transport = Negotiator(Settings(), models=models or world.models()).transport
    urls, servers = {}, {}
    for role in ("drive", "evaluator", "mediator"):
        sock = listening_socket()
        urls[role] = f"http://127.0.0.1:{sock.getsockname()[1]}"
        servers[role] = Server(build_role_app(role, transport, urls[role], TOKENS[role]), sock)  # type: ignore[arg-type]
    try:
        yield urls, servers
    finally:
        for s in servers.values():
            if s.thread.is_alive():
                s.stop()


def drive_message() -> SendMessageRequest:
    task = DriveTask(request="How do I boil an egg?", context="chat", n=1)
    return SendMessageRequest(message=new_data_message(encode_task(task), role=Role.ROLE_USER))


EGG = [proposals(("Boil it for 6 minutes.", 0.9))]


async def test_card_send_stream_get_and_auth() -> None:
    with role_servers(World(EGG)) as (urls, _):
        async with httpx.AsyncClient(headers={"Authorization": "Bearer tok-drive"}, timeout=30) as hc:
            card = await A2ACardResolver(hc, urls["drive"]).get_agent_card()
            assert card.name == "PsychoAlign DRIVE"
            assert card.skills[0].id == "propose"
            assert "bearer" in card.security_schemes
            assert {i.protocol_binding for i in card.supported_interfaces} == {"JSONRPC", "HTTP+JSON"}
            for binding in ("JSONRPC", "HTTP+JSON"):
                client = ClientFactory(
                    ClientConfig(streaming=False, httpx_client=hc, supported_protocol_bindings=[binding])
                ).create(card)
                tasks = [r.task async for r in client.send_message(drive_message()) if r.HasField("task")]
                assert tasks[-1].status.state == TaskState.TASK_STATE_COMPLETED
                reply = get_data_parts(list(tasks[-1].artifacts[0].parts))[0]
                assert reply["reply"]["output"]["proposals"][0]["text"] == "Boil it for 6 minutes."
                fetched = await client.get_task(GetTaskRequest(id=tasks[-1].id))
                assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
            streaming = ClientFactory(ClientConfig(streaming=True, httpx_client=hc)).create(card)
            kinds = [r.WhichOneof("payload") async for r in streaming.send_message(drive_message())]
            assert kinds[0] == "task" and "artifact_update" in kinds and kinds[-1] == "status_update"
        # No token: the HTTP layer refuses before any agent runs.
        async with httpx.AsyncClient(timeout=30) as anon:
            resp = await anon.post(
                f"{urls['drive']}/a2a/jsonrpc", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask"}
            )
            assert resp.status_code == 401
            error = resp.json()["error"]  # a JSON-RPC error object, not an ad-hoc body
            assert resp.json()["jsonrpc"] == "2.0" and error["code"] == -32040 and "Unauthenticated" in error["message"]
            rest = await anon.get(f"{urls['drive']}/a2a/rest/tasks")
            assert rest.status_code == 401 and rest.json()["error"]["status"] == "UNAUTHENTICATED"
            assert (await anon.get(f"{urls['drive']}/.well-known/agent-card.json")).status_code == 200


async def test_drive_cannot_reach_evaluator_over_the_network() -> None:
    world = World(EGG)
    with role_servers(world) as (urls, _):
        transport = A2ATransport(urls, token=TOKENS["drive"])  # a DRIVE holding its own credentials
        trace = await Negotiator(Settings(), transport=transport).negotiate("egg?")
        await transport.aclose()
    assert trace.status is TraceStatus.FAILED
    assert "evaluator agent" in (trace.error or "") and "401" in (trace.error or "")
    assert world.calls["evaluator"] == 0


def test_role_service_refuses_to_start_without_credentials() -> None:
    transport = Negotiator(Settings(), models=World(EGG).models()).transport
    with pytest.raises(ConfigError, match="refuses to start without credentials"):
        build_role_app("drive", transport, "http://127.0.0.1:1")
    assert build_role_app("drive", transport, "http://127.0.0.1:1", insecure=True) is not None
    out = cli("agent", "serve", "--role", "evaluator")
    assert out.returncode != 0 and "refuses to start without credentials" in out.stderr
    assert "PSYCHOALIGN_A2A__TOKENS__EVALUATOR" in out.stderr and "Traceback" not in out.stderr
    exposed = cli("agent", "serve", "--role", "drive", "--insecure", "--host", "0.0.0.0")
    assert exposed.returncode != 0 and "only on a loopback address" in exposed.stderr
    system = cli("serve-a2a")
    assert system.returncode != 0 and "system agent refuses to start without credentials" in system.stderr


async def test_negotiation_over_a2a_matches_in_process() -> None:
    def judge(text: str) -> dict[str, Any]:
        return (
            evaluation(65, "CONDITIONAL", mods=["Add a caveat."]) if text == "Answer." else evaluation(90, "APPROVED")
        )

    drafts = proposals(("Answer.", 0.9), ("Other answer.", 0.6))
    local = await World([drafts], judge=judge).negotiator(fast_path=True).negotiate("q")
    world = World([drafts], judge=judge)
    with role_servers(world) as (urls, _):
        transport = A2ATransport(urls, tokens=TOKENS)
        # the same crisis screen as the in-process World's (the negotiation runs it for a remote EVALUATOR)
        remote = await Negotiator(Settings(), transport=transport, crisis=scripted_crisis()).negotiate("q")
        await transport.aclose()
    assert remote.status is TraceStatus.COMPLETED
    strip = {"id", "created_at", "finished_at", "agents", "models", "metadata"}
    assert remote.model_dump(exclude=strip) == local.model_dump(exclude=strip)
    assert remote.agents["evaluator"].hosts == [urls["evaluator"]]
    # One EVALUATOR message per DRIVE reply (round 1 asks for one proposal, then the rest), still
    # one model call per proposal; an approved proposal adopted verbatim is not re-evaluated.
    assert remote.final is not None and remote.final.composed_by == "adopted"
    assert remote.agents["evaluator"].calls == remote.agents["drive"].calls == 2
    assert world.calls["evaluator"] == sum(len(rd.proposals) for rd in remote.rounds)
    assert remote.models["drive"] == f"a2a:{urls['drive']}"


async def test_settings_that_name_remote_agents_negotiate_over_a2a() -> None:
    """a2a.urls for all three roles: remote_transport builds the A2A transport the negotiator is
    given; a negotiator built from such settings without a transport refuses to start (it would
    otherwise run the agents in-process, not where the configuration put them)."""
    assert remote_transport(Settings()) is None
    world = World([proposals(("Answer.", 0.9))])
    with role_servers(world) as (urls, _):
        partial = Settings.model_validate({"a2a": {"urls": {"drive": urls["drive"]}, "tokens": TOKENS}})
        assert remote_transport(partial) is None
        settings = Settings.model_validate({"a2a": {"urls": urls, "tokens": TOKENS}})
        with pytest.raises(ConfigError, match="no transport"):
            Negotiator(settings)
        transport = remote_transport(settings)
        assert isinstance(transport, A2ATransport)
        negotiator = Negotiator(settings, transport=transport)
        trace = await negotiator.negotiate("q")
        await negotiator.aclose()
    assert trace.status is TraceStatus.COMPLETED
    assert trace.models == {role: f"a2a:{url}" for role, url in urls.items()}
    assert trace.agents["drive"].hosts == [urls["drive"]]


async def test_agent_killed_mid_negotiation_fails_closed() -> None:
    world = World([proposals(("SECRET proposal", 0.9))])
    started, release = threading.Event(), threading.Event()  # the servers run in other threads

    async def drive(request: ChatRequest) -> Any:
        started.set()
        await asyncio.to_thread(release.wait, 30)
        return world.drive(request)

    models = world.models()
    spec = ModelSpec(backend="scripted", model="drive", schema_retries=0, max_retries=0)
    models["drive"] = ChatModel(spec, ScriptedBackend(spec, fn=drive))
    with role_servers(world, models) as (urls, servers):
        transport = A2ATransport(urls, tokens=TOKENS, retries=1, backoff_s=0.05)
        task = asyncio.create_task(Negotiator(Settings(), transport=transport).negotiate("q"))
        await asyncio.to_thread(started.wait, 30)  # the DRIVE is thinking; the EVALUATOR goes down
        await asyncio.to_thread(servers["evaluator"].stop)
        release.set()
        trace = await task
        await transport.aclose()
    assert trace.status is TraceStatus.FAILED
    assert "unreachable" in (trace.error or "")
    assert trace.response == template("fail_closed")
    assert "SECRET" not in trace.response


async def test_invalid_task_is_rejected() -> None:
    with role_servers(World(EGG)) as (urls, _):
        async with httpx.AsyncClient(headers={"Authorization": "Bearer tok-evaluator"}, timeout=30) as hc:
            card = await A2ACardResolver(hc, urls["evaluator"]).get_agent_card()
            client = ClientFactory(ClientConfig(streaming=False, httpx_client=hc)).create(card)
            wrong_kind = [r.task async for r in client.send_message(drive_message()) if r.HasField("task")]
            assert wrong_kind[-1].status.state == TaskState.TASK_STATE_REJECTED
            junk = SendMessageRequest(message=new_data_message({"hello": 1}, role=Role.ROLE_USER))
            junk_tasks = [r.task async for r in client.send_message(junk) if r.HasField("task")]
            assert junk_tasks[-1].status.state == TaskState.TASK_STATE_REJECTED


def test_unknown_role_url_is_a_clear_error() -> None:
    with pytest.raises(Exception, match="no A2A URL configured for role 'mediator'"):
        asyncio.run(A2ATransport({"drive": "http://x"})._client("mediator"))


async def test_packed_task_gets_a_packed_reply_and_three_events() -> None:
    """PsychoAlign's transport sends the task as one JSON string and gets the reply the same way;
    an accepted task starts 'working' (first event), then the artifact, then completion."""
    from psychoalign.a2a.codec import decode_reply

    task = DriveTask(request="How do I boil an egg?", context="chat", n=1)
    packed = SendMessageRequest(message=new_data_message(encode_task(task, packed=True), role=Role.ROLE_USER))
    with role_servers(World(EGG)) as (urls, _):
        async with httpx.AsyncClient(headers={"Authorization": "Bearer tok-drive"}, timeout=30) as hc:
            card = await A2ACardResolver(hc, urls["drive"]).get_agent_card()
            client = ClientFactory(ClientConfig(streaming=False, httpx_client=hc)).create(card)
            done = [r.task async for r in client.send_message(packed) if r.HasField("task")][-1]
            data = get_data_parts(list(done.artifacts[0].parts))[0]
            assert isinstance(data["replyJson"], str) and "reply" not in data  # A2A JSON is camelCase
            reply = decode_reply("drive", data, host=urls["drive"])
            assert reply.output.proposals[0].text == "Boil it for 6 minutes." and reply.host == urls["drive"]
            streaming = ClientFactory(ClientConfig(streaming=True, httpx_client=hc)).create(card)
            events = [r async for r in streaming.send_message(packed)]
    assert [e.WhichOneof("payload") for e in events] == ["task", "artifact_update", "status_update"]
    assert events[0].task.status.state == TaskState.TASK_STATE_WORKING
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


def test_packed_codec_validates_like_the_structured_one() -> None:
    from psychoalign.a2a.codec import decode_reply, decode_task, encode_reply
    from psychoalign.agents.messages import AgentReply
    from psychoalign.agents.schemas import DriveOutput
    from psychoalign.errors import EndpointError

    task = DriveTask(request="q", context="chat", n=2, feedback="be brief")
    assert decode_task(encode_task(task, packed=True)) == decode_task(encode_task(task)) == task
    with pytest.raises(ValueError, match="invalid task"):
        decode_task({"psychoalign": "task", "taskJson": '{"kind": "drive", "n": "many"}'})
    with pytest.raises(ValueError, match="invalid task"):
        decode_task({"psychoalign": "task", "task_json": "not json"})
    reply = AgentReply[DriveOutput].model_validate(
        {"output": {"proposals": [{"text": "A.", "utility": 0.5}]}, "model": "m"}
    )
    assert decode_reply("drive", encode_reply(reply, packed=True), host="h").output == reply.output
    hostile = {"psychoalign": "reply", "replyJson": '{"output": {"proposals": [{"text": "A.", "utility": 7}]}}'}
    with pytest.raises(EndpointError, match="invalid 'drive' reply"):
        decode_reply("drive", hostile, host="h")  # utility out of [0, 1]: fails closed


def test_data_parts_are_camel_case_and_both_spellings_decode() -> None:
    """A2A JSON is camelCase: every key of a task or reply data part, packed or structured. The
    snake_case spelling of the previous release still decodes (mixed versions interoperate)."""
    from psychoalign.a2a.codec import decode_reply, decode_task, encode_reply
    from psychoalign.agents.messages import AgentReply, EvaluateBatchTask
    from psychoalign.agents.schemas import Evaluation, EvaluationBatch
    from psychoalign.frameworks import load_framework
    from tests.scenario import evaluation

    task = EvaluateBatchTask(
        request="q", context="c", proposals=["a"], framework=load_framework("general").model_dump(mode="json")
    )
    verdict = Evaluation.model_validate(evaluation(70, "CONDITIONAL", hits=[("C1-dual-use", "contextual")]))
    reply = AgentReply[EvaluationBatch].model_validate(
        {"output": {"evaluations": [verdict.model_dump()]}, "model": "m"}
    )
    for packed in (False, True):
        for data in (encode_task(task, packed=packed), encode_reply(reply, packed=packed)):
            assert all("_" not in key for key in json_keys(data)), data.keys()
        assert decode_task(encode_task(task, packed=packed)) == task
        assert decode_reply("evaluate_batch", encode_reply(reply, packed=packed), host="h").output == reply.output
    legacy_task = {"psychoalign": "task", "task_json": task.model_dump_json()}
    legacy_reply = {"psychoalign": "reply", "reply": reply.model_dump(mode="json")}
    assert decode_task(legacy_task) == task
    assert (
        decode_reply("evaluate_batch", legacy_reply, host="h").output.evaluations[0].rule_hits[0].rule_id
        == "C1-dual-use"
    )


async def test_the_in_memory_task_store_forgets_old_finished_tasks_but_never_a_running_one() -> None:
    """The SDK's in-memory store kept every task forever; a role service grew without limit."""
    from a2a.auth.user import UnauthenticatedUser
    from a2a.server.context import ServerCallContext
    from a2a.types import Task, TaskStatus

    from psychoalign.a2a.server import BoundedTaskStore

    store = BoundedTaskStore(limit=10)
    context = ServerCallContext(user=UnauthenticatedUser())
    running = Task(id="running", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_WORKING))
    await store.save(running, context)
    for i in range(100):
        await store.save(
            Task(id=f"t{i}", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED)), context
        )
    kept = [t.id for t in (await store.list(ListTasksRequest(page_size=100), context)).tasks]
    assert len(kept) <= 12 and "running" in kept and "t99" in kept and "t0" not in kept
    assert await store.get("running", context) is not None and await store.get("t0", context) is None


GET_UNKNOWN = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}}


@pytest.mark.parametrize(
    ("base", "headers", "served"),
    [
        ("http://127.0.0.1:8101", {}, True),
        ("http://127.0.0.1:8101", {"Origin": "http://127.0.0.1:8101"}, True),  # its own origin
        ("http://localhost:8101", {}, True),  # a loopback bind answers the local names
        ("http://evil.example:8101", {}, False),  # DNS rebinding: a name the server is not
        ("http://127.0.0.1:8101", {"Origin": "http://evil.example"}, False),
        ("http://127.0.0.1:8101", {"Origin": "null"}, False),
        ("http://127.0.0.1:8101", {"Sec-Fetch-Site": "cross-site"}, False),
    ],
)
async def test_an_open_service_answers_only_its_own_host_and_origin(
    base: str, headers: dict[str, str], served: bool
) -> None:
    """--insecure trusts callers by address, so a page the user visits must not reach it: a
    rebound Host or a foreign Origin is refused before the SDK runs, in the binding's shape."""
    transport = Negotiator(Settings(), models=World(EGG).models()).transport
    app = build_role_app("drive", transport, "http://127.0.0.1:8101", insecure=True)
    wire = {"A2A-Version": "1.0", **headers}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base) as hc:
        rpc = await hc.post("/a2a/jsonrpc", json=GET_UNKNOWN, headers=wire)
        rest = await hc.get("/a2a/rest/tasks/nope", headers=wire)
    if served:
        assert rpc.status_code == 200 and rpc.json()["error"]["code"] == -32001
        assert rest.status_code == 404
    else:
        assert rpc.status_code == 403, rpc.text
        assert rpc.json()["error"]["data"][0]["reason"] == "PERMISSION_DENIED"
        assert rest.status_code == 403 and rest.json()["error"]["status"] == "PERMISSION_DENIED"
        assert "access-control-allow-origin" not in rpc.headers


@pytest.mark.parametrize("service", ["role", "system"])
async def test_only_the_cards_interface_urls_are_served_and_nothing_redirects(service: str) -> None:
    """The card names ``/a2a/jsonrpc`` and ``/a2a/rest``: the JSON-RPC URL answers with and
    without its trailing slash (clients and the A2A TCK post to both); ``/a2a``, ``/a2a/``, the
    REST prefix itself and any other path are a 404 in the HTTP+JSON shape, never a redirect,
    whatever the Host header says. The card says push notifications are not offered."""
    from psychoalign.a2a.system import build_system_app

    world = World(EGG)
    if service == "role":
        app = build_role_app(
            "drive", Negotiator(Settings(), models=world.models()).transport, "http://testserver", "tok"
        )
    else:
        app = build_system_app(Negotiator(Settings(), models=world.models()), "http://testserver", token="tok")
    wire = {"Authorization": "Bearer tok", "A2A-Version": "1.0"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as hc:
        card = (await hc.get("/.well-known/agent-card.json")).json()
        assert card["capabilities"]["pushNotifications"] is False
        assert {i["url"] for i in card["supportedInterfaces"]} == {
            "http://testserver/a2a/jsonrpc",
            "http://testserver/a2a/rest",
        }
        for path in ("/a2a/jsonrpc", "/a2a/jsonrpc/"):
            rpc = await hc.post(path, json=GET_UNKNOWN, headers=wire)
            assert rpc.status_code == 200 and rpc.json()["error"]["code"] == -32001, path
        for method in ("GET", "POST", "DELETE"):
            for path in ("/", "/a2a", "/a2a/", "/a2a/rest", "/a2a/rest/", "/nope", "/.well-known/agent-card.json/"):
                for host in ("testserver", "evil.example"):
                    r = await hc.request(method, path, headers={**wire, "Host": host})
                    assert r.status_code == 404 and "location" not in r.headers, (method, path, host, r.status_code)
                    assert r.json()["error"]["status"] == "NOT_FOUND"
    assert world.calls["drive"] == 0


@pytest.mark.parametrize("service", ["role", "system"])
async def test_the_old_card_path_is_a_404_naming_the_card_with_or_without_a_token(service: str) -> None:
    """``/.well-known/agent.json`` (where earlier A2A versions served the card) answers as any
    unknown path does, but without asking for a token first: a client probing for the card learns
    where it is. A method its route does not answer still needs the token."""
    from psychoalign.a2a.system import build_system_app

    world = World(EGG)
    if service == "role":
        app = build_role_app(
            "drive", Negotiator(Settings(), models=world.models()).transport, "http://testserver", "tok"
        )
    else:
        app = build_system_app(Negotiator(Settings(), models=world.models()), "http://testserver", token="tok")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as hc:
        for headers in ({}, {"Authorization": "Bearer tok"}, {"Authorization": "Bearer wrong"}):
            for method in ("GET", "POST", "DELETE"):
                r = await hc.request(method, "/.well-known/agent.json", headers=headers)
                assert r.status_code == 404 and "location" not in r.headers, (method, headers, r.status_code)
                error = r.json()["error"]
                assert error["status"] == "NOT_FOUND"
                assert error["message"] == (
                    "no A2A route at /.well-known/agent.json: the agent card is at /.well-known/agent-card.json"
                )
        assert (await hc.request("PROPFIND", "/.well-known/agent.json")).status_code == 401
        assert (await hc.get("/.well-known/agent-card.json")).status_code == 200
    assert world.calls["drive"] == 0
