"""The system agent: the whole negotiation behind one A2A agent; `psychoalign up` across processes."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers import get_artifact_text, get_data_parts, get_message_text, new_text_message
from a2a.types import Role, SendMessageRequest, TaskState

from psychoalign.a2a.system import CLARIFY, build_system_app
from psychoalign.config import Settings
from psychoalign.negotiation import Negotiator
from tests.a2a.test_server import Server
from tests.cli.test_main import cli
from tests.cli.test_negotiate import write_config
from tests.loopback import free_port, listening_socket
from tests.scenario import World, evaluation, proposals


def user_text(text: str, context_id: str | None = None) -> SendMessageRequest:
    return SendMessageRequest(message=new_text_message(text, role=Role.ROLE_USER, context_id=context_id))


async def _send(url: str, token: str | None, request: SendMessageRequest) -> object:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=120) as hc:
        card = await A2ACardResolver(hc, url).get_agent_card()
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=hc)).create(card)
        tasks = [r.task async for r in client.send_message(request) if r.HasField("task")]
    return tasks[-1]


async def test_system_agent_answers_with_tension_and_maps_deadlock_to_input_required() -> None:
    world = World(
        [proposals(("VETOED-TEXT", 0.9))],
        judge=lambda t: (
            evaluation(10, "VETOED", harmful_intent=True, legitimate_need=True, safe_channel="a pharmacist")
            if t == "VETOED-TEXT"
            else evaluation(90, "APPROVED")
        ),
        compose=lambda p, i: "Please talk to a pharmacist about dosing.",
    )
    negotiator = world.negotiator()
    sock = listening_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = Server(build_system_app(negotiator, url, token="user-tok"), sock)
    try:
        task = await _send(url, "user-tok", user_text("How many pills are too many?"))
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED  # type: ignore[attr-defined]
        assert get_message_text(task.status.message) == CLARIFY  # type: ignore[attr-defined]
        artifact = task.artifacts[0]  # type: ignore[attr-defined]
        assert "pharmacist" in get_artifact_text(artifact)
        info = get_data_parts(list(artifact.parts))[0]
        assert info["state"] == "deadlock" and info["defense"] == "sublimation"
        assert 0.0 <= info["tension"] <= 1.0 and len(info["traceId"]) == 32
        assert all("_" not in key for key in info)  # A2A JSON is camelCase
        assert dict(task.artifacts[0].metadata) == info  # type: ignore[attr-defined]
        assert "VETOED-TEXT" not in get_artifact_text(artifact)
        # No token: refused before anything runs.
        async with httpx.AsyncClient(timeout=10) as anon:
            resp = await anon.post(f"{url}/a2a/jsonrpc", json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage"})
            assert resp.status_code == 401
    finally:
        server.stop()


def _pid_listening(port: int) -> int:
    """The pid of the process with a listening TCP socket on ``port`` (Linux /proc)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":
                inodes.add(fields[9])
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd).removeprefix("socket:[").removesuffix("]") in inodes:
                    return int(proc.name)
        except OSError:
            continue
    raise AssertionError(f"nothing listens on {port}")


def _free_block(n: int) -> int:
    for _ in range(50):
        base = free_port()
        ok = True
        for p in range(base, base + n):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free block of ports")


def test_up_runs_four_processes_and_matches_in_process(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    config.write_text(config.read_text() + '\n[a2a.tokens]\nmediator = "m"\ndrive = "d"\nevaluator = "e"\nuser = "u"\n')
    base = _free_block(4)
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "psychoalign", "up", "--port-base", str(base)),
            *("--config", str(config), "--startup-timeout", "600"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ),
        start_new_session=True,
    )
    try:
        # `up` says "Ctrl-C to stop." once every agent's card answers: wait for that line (an
        # event), not for a deadline; a process that dies ends the output and fails the test.
        url = f"http://127.0.0.1:{base}"
        assert proc.stdout is not None
        said = b""
        while b"Ctrl-C to stop." not in said:
            line = proc.stdout.readline()
            assert line, f"psychoalign up stopped: {said.decode(errors='replace')}"
            said += line
        import asyncio

        task = asyncio.run(_send(url, "u", user_text("How do I boil an egg?")))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED  # type: ignore[attr-defined]
        info = get_data_parts(list(task.artifacts[0].parts))[0]  # type: ignore[attr-defined]
        # Each child holds only its own token: the DRIVE's process knows neither the
        # EVALUATOR's token nor the client's (in its environment or its config file).
        drive_pid = _pid_listening(base + 1)
        environ = Path(f"/proc/{drive_pid}/environ").read_bytes().decode(errors="replace")
        cmdline = Path(f"/proc/{drive_pid}/cmdline").read_bytes().decode().split("\0")
        child_config = yaml.safe_load(Path(cmdline[cmdline.index("--config") + 1]).read_text())
        assert child_config["a2a"]["tokens"] == {"drive": "d"}
        for secret in ("=e\0", "=m\0", "=u\0"):
            assert secret not in environ
        follow = asyncio.run(_send(url, "u", user_text("And for a hard yolk?", context_id=task.context_id)))  # type: ignore[attr-defined]
        assert follow.status.state == TaskState.TASK_STATE_COMPLETED  # type: ignore[attr-defined]
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=30)
    for port in range(base, base + 4):  # every process stopped and released its port
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0
    remote = json.loads(cli("traces", "show", info["traceId"], "--config", str(config), "--json").stdout)
    local = json.loads(
        cli("negotiate", "--config", str(config), "--json", "--no-store", "How do I boil an egg?").stdout
    )
    for key in ("rounds", "final", "converged", "framework", "params", "contribution"):
        assert remote[key] == local[key], key
    assert remote["agents"]["evaluator"]["hosts"] == [f"http://127.0.0.1:{base + 2}"]
    listed = json.loads(cli("traces", "list", "--config", str(config), "--json").stdout)
    followup = next(t for t in listed if t["id"] != info["traceId"])
    assert followup["request"] == "And for a hard yolk?"  # the earlier turn is in its context


async def test_clients_select_only_the_deployments_frameworks_never_paths(tmp_path: Path) -> None:
    """A request blocked under `general` must not pass under a weaker framework the caller names."""
    weak = tmp_path / "weak.yaml"
    weak.write_text("name: weak\nversion: '1.0'\ndescription: x\nuniversal:\n  - id: U1\n    text: Anything goes.\n")
    world = World([proposals(("Answer.", 0.9))])
    negotiator = Negotiator(Settings(), models=world.models())
    sock = listening_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app = build_system_app(negotiator, url, token="t", frameworks=["general", "medical"])
    server = Server(app, sock)
    try:
        for choice, offered in (("medical", True), ("child-safe", False), (str(weak), False), ("../weak", False)):
            msg = new_text_message("hello", role=Role.ROLE_USER)
            msg.metadata.update({"framework": choice})
            task = await _send(url, "t", SendMessageRequest(message=msg))
            state = task.status.state  # type: ignore[attr-defined]
            if offered:
                assert state == TaskState.TASK_STATE_COMPLETED
                info = get_data_parts(list(task.artifacts[0].parts))[0]  # type: ignore[attr-defined]
                assert info["framework"] == "medical"
            else:
                assert state == TaskState.TASK_STATE_REJECTED, choice
                assert "general, medical" in get_message_text(task.status.message)  # type: ignore[attr-defined]
        assert world.calls["drive"] == 1  # rejected requests never reached an agent
    finally:
        server.stop()


async def test_conformance_trailing_slash_cache_control_and_401_shapes() -> None:
    world = World([proposals(("Answer.", 0.9))])
    sock = listening_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = Server(build_system_app(Negotiator(Settings(), models=world.models()), url, token="t"), sock)
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "SendMessage",
        "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}},
    }
    try:
        async with httpx.AsyncClient(timeout=60) as hc:
            card = await hc.get(f"{url}/.well-known/agent-card.json")
            assert "max-age" in card.headers["cache-control"]
            headers = {"Authorization": "Bearer t", "A2A-Version": "1.0"}
            for path in ("/a2a/jsonrpc", "/a2a/jsonrpc/"):
                resp = await hc.post(f"{url}{path}", json=body, headers=headers)
                assert resp.status_code == 200, path
                task = resp.json()["result"]["task"]
                assert task["status"]["state"] == "TASK_STATE_COMPLETED"
                assert "traceId" in task["artifacts"][0]["metadata"]
            anon = await hc.post(f"{url}/a2a/jsonrpc/", json=body)
            assert anon.status_code == 401 and anon.json()["error"]["code"] == -32040
            assert anon.json()["id"] is None and anon.headers["www-authenticate"] == "Bearer"
            rest = await hc.post(f"{url}/a2a/rest/message:send", json={"message": body["params"]["message"]})
            assert rest.status_code == 401
            err = rest.json()["error"]
            assert err["code"] == 401 and err["status"] == "UNAUTHENTICATED" and err["details"][0]["reason"]
    finally:
        server.stop()


async def test_all_three_transports_with_the_official_client() -> None:
    """JSON-RPC, HTTP+JSON and gRPC serve one agent (one handler, one task store, one credential)."""
    import grpc
    import grpc.aio
    import uvicorn
    from a2a.client import ClientCallContext

    from psychoalign.a2a.grpc_binding import build_grpc_server

    world = World([proposals(("Boil it for 6 minutes.", 0.9))])
    listener = socket.socket()  # listening before the server starts: clients queue, no waiting
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port, grpc_port = listener.getsockname()[1], free_port()
    url, grpc_url = f"http://127.0.0.1:{port}", f"127.0.0.1:{grpc_port}"
    app = build_system_app(Negotiator(Settings(), models=world.models()), url, token="t", grpc_url=grpc_url)
    http = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    serving = asyncio.create_task(http.serve(sockets=[listener]))
    rpc = build_grpc_server(app.state.a2a_handler, grpc_url, app.state.a2a_auth)
    await rpc.start()
    try:
        auth = ClientCallContext(service_parameters={"Authorization": "Bearer t"})
        async with httpx.AsyncClient(headers={"Authorization": "Bearer t"}, timeout=60) as hc:
            card = await A2ACardResolver(hc, url).get_agent_card()
            assert {i.protocol_binding for i in card.supported_interfaces} == {"JSONRPC", "HTTP+JSON", "GRPC"}
            for binding in ("JSONRPC", "HTTP+JSON", "GRPC"):
                config = ClientConfig(
                    streaming=False,
                    httpx_client=hc,
                    grpc_channel_factory=grpc.aio.insecure_channel,
                    supported_protocol_bindings=[binding],
                )
                client = ClientFactory(config).create(card)
                request = user_text("How do I boil an egg?")
                tasks = [r.task async for r in client.send_message(request, context=auth) if r.HasField("task")]
                assert tasks[-1].status.state == TaskState.TASK_STATE_COMPLETED, binding
                assert get_artifact_text(tasks[-1].artifacts[0]) == "Boil it for 6 minutes.", binding
                assert "traceId" in get_data_parts(list(tasks[-1].artifacts[0].parts))[0]
            anonymous = ClientFactory(
                ClientConfig(
                    streaming=False,
                    grpc_channel_factory=grpc.aio.insecure_channel,
                    supported_protocol_bindings=["GRPC"],
                )
            ).create(card)
            with pytest.raises(Exception, match=r"(?i)unauthenticated"):
                async for _ in anonymous.send_message(user_text("hi")):
                    pass
    finally:
        await rpc.stop(None)
        http.should_exit = True
        await serving


async def test_a_store_failure_over_a2a_is_a_clean_failed_task(tmp_path: Path) -> None:
    """The JSON-RPC answer never carries SQL, parameters or a traceback; the task fails closed."""
    from tests.test_edges import BrokenStore

    store = BrokenStore(f"sqlite:///{tmp_path / 't.db'}")
    negotiator = Negotiator(Settings(), models=World([proposals(("DRIVE TEXT", 0.9))]).models(), store=store)
    sock = listening_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = Server(build_system_app(negotiator, url, token="t"), sock)
    try:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "q\u0000"}]}},
        }
        async with httpx.AsyncClient(timeout=60) as hc:
            resp = await hc.post(
                f"{url}/a2a/jsonrpc", json=body, headers={"Authorization": "Bearer t", "A2A-Version": "1.0"}
            )
        assert resp.status_code == 200
        raw = resp.text
        task = resp.json()["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        for leak in ("INSERT", "SECRET-PARAM", "Traceback", "DRIVE TEXT", "psychoalign_traces"):
            assert leak not in raw
    finally:
        server.stop()
        await store.close()


def test_serve_a2a_on_ipv6_loopback_advertises_bracketed_urls_for_every_transport(tmp_path: Path) -> None:
    """`--host ::1` used to advertise http://::1:8100 and bind gRPC to '::1:8101' (no brackets);
    `--port 0` used to advertise port 0. The command listens before it prints where: the printed
    URL is reachable at once."""
    import grpc
    import grpc.aio
    from a2a.client import ClientCallContext

    config = write_config(tmp_path)
    grpc_port = free_port()
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "psychoalign", "serve-a2a", "--host", "::1", "--insecure"),
            *("--port", "0", "--grpc-port", str(grpc_port), "--config", str(config)),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"system agent on (http://\[::1\]:(\d+)) ", line)
        assert found and found.group(2) != "0", line
        url = found.group(1)
        card = httpx.get(f"{url}/.well-known/agent-card.json", timeout=120).json()
        urls = {i["protocolBinding"]: i["url"] for i in card["supportedInterfaces"]}
        assert urls == {
            "JSONRPC": f"{url}/a2a/jsonrpc",
            "HTTP+JSON": f"{url}/a2a/rest",
            "GRPC": f"[::1]:{grpc_port}",
        }

        async def over_grpc() -> object:
            async with httpx.AsyncClient(timeout=60) as hc:
                resolved = await A2ACardResolver(hc, url).get_agent_card()
                config = ClientConfig(
                    streaming=False,
                    grpc_channel_factory=grpc.aio.insecure_channel,
                    supported_protocol_bindings=["GRPC"],
                )
                client = ClientFactory(config).create(resolved)
                tasks = [
                    r.task
                    async for r in client.send_message(user_text("How do I boil an egg?"), context=ClientCallContext())
                    if r.HasField("task")
                ]
                return tasks[-1]

        task = asyncio.run(over_grpc())
        assert task.status.state == TaskState.TASK_STATE_COMPLETED  # type: ignore[attr-defined]
    finally:
        proc.terminate()
        proc.wait(timeout=60)


@pytest.mark.parametrize("role", ["system", "drive"])
async def test_a_message_not_from_the_user_is_invalid_params_not_an_internal_error(role: str) -> None:
    """A2A clients send ROLE_USER messages; an agent-role message is the client's mistake
    (-32602 / HTTP 400 naming message.role), not -32603 with a traceback in the server's log."""
    from psychoalign.a2a import build_role_app

    world = World([proposals(("Boil it for 6 minutes.", 0.9))])
    negotiator = Negotiator(Settings(), models=world.models())
    base = "http://testserver"
    if role == "system":
        app = build_system_app(negotiator, base, token="t")
    else:
        app = build_role_app("drive", negotiator.transport, base, "t")
    message = {"messageId": "m1", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]}
    wire = {"A2A-Version": "1.0", "Authorization": "Bearer t"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base) as hc:
        rpc = await hc.post(
            "/a2a/jsonrpc",
            headers=wire,
            json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}},
        )
        rest = await hc.post("/a2a/rest/message:send", headers=wire, json={"message": {**message, "messageId": "m2"}})
    assert rpc.json()["error"]["code"] == -32602, rpc.text
    assert "message.role" in rpc.json()["error"]["message"]
    assert rest.status_code == 400 and rest.json()["error"]["status"] == "INVALID_ARGUMENT", rest.text
    assert world.calls["drive"] == 0
