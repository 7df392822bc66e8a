"""`psychoalign serve` as users run it: one process with every face, SIGTERM, exposure checks;
and the A2A system agent served by the same app."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import openai
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers import get_artifact_text, get_data_parts

from psychoalign.config import Settings
from psychoalign.traces import InMemoryTraceStore
from psychoalign.web import create_app
from tests.a2a.test_system import user_text
from tests.cli.test_main import cli
from tests.cli.test_negotiate import write_config
from tests.loopback import free_port
from tests.scenario import World, proposals
from tests.webserver import run_app


async def test_the_app_serves_the_a2a_system_agent() -> None:
    store = InMemoryTraceStore()
    port = free_port()
    world = World([proposals(("Boil it for nine minutes.", 0.9))])
    app = create_app(
        Settings(),
        store=store,
        negotiators={"psychoalign": world.negotiator(store)},
        base_url=f"http://127.0.0.1:{port}",
    )
    with run_app(app, port) as running:
        async with httpx.AsyncClient(timeout=60) as hc:
            card = await A2ACardResolver(hc, running.url).get_agent_card()
            client = ClientFactory(ClientConfig(streaming=False, httpx_client=hc)).create(card)
            tasks = [
                r.task async for r in client.send_message(user_text("How do I boil an egg?")) if r.HasField("task")
            ]
    artifact = tasks[-1].artifacts[0]
    assert get_artifact_text(artifact).startswith("Boil it for nine minutes.")
    info = get_data_parts(list(artifact.parts))[0]
    trace = await store.get(info.get("traceId") or info["trace_id"])
    assert trace is not None and trace.request == "How do I boil an egg?"


def test_serve_command_answers_openai_clients_and_stops_on_sigterm(tmp_path: Path) -> None:
    """`serve --port 0`: the command binds (and listens) before it prints its banner, so the URL in
    the banner is reachable at once (no waiting, no port race), and the A2A card names that port
    (it said :0)."""
    config = write_config(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "psychoalign", "serve", "--port", "0", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        match = re.match(r"PsychoAlign on (http://127\.0\.0\.1:(\d+)) ", first)
        assert match and match.group(2) != "0", first + (proc.stderr.read() if proc.poll() is not None else "")
        url = match.group(1)
        banner = first
        while "export PSYCHOALIGN_TOKEN=" not in banner and proc.poll() is None:
            banner += proc.stderr.readline()
        # The keyless deployment's per-start token (serve.local_token), ready to paste.
        exported = re.search(r"export PSYCHOALIGN_TOKEN=(\S+) OPENAI_BASE_URL=(\S+)", banner)
        assert exported and exported.group(2) == f"{url}/v1", banner
        token = exported.group(1)
        assert f"local token for psychoalign (/v1 and A2A; new at each start): {token}" in banner
        assert httpx.get(f"{url}/v1/models", timeout=30).status_code == 401
        # The banner's page URL: opened once in a browser, its cookie stands for the token there.
        assert re.search(rf"in a browser, open once \(.*\): {re.escape(url)}/\?token={re.escape(token)}\n", banner)
        with httpx.Client(timeout=30) as browser:
            assert browser.get(f"{url}/?token={token}").status_code == 303
            assert browser.get(f"{url}/v1/models").status_code == 200
            # ... and signs the server's owner in to the lab: the trace viewer and the lead's pages open
            assert browser.get(f"{url}/traces").status_code == 200
            assert browser.get(f"{url}/").headers["location"] == "/lead"
        card = httpx.get(f"{url}/.well-known/agent-card.json", timeout=120).json()
        assert {i["url"] for i in card["supportedInterfaces"]} == {f"{url}/a2a/jsonrpc", f"{url}/a2a/rest"}
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=token, max_retries=0)
        raw = client.chat.completions.with_raw_response.create(
            model="psychoalign",
            messages=[{"role": "user", "content": "How do I boil an egg?"}],
            extra_headers={"x-request-id": "serve-test-1"},
        )
        assert raw.parse().choices[0].message.content == "Boil the egg for 6 minutes."
        trace_id = raw.headers["x-psychoalign-trace-id"]
        assert httpx.get(f"{url}/.well-known/agent-card.json", timeout=5).json()["name"] == "PsychoAlign"
        # The repro (a web page's request through a rebound name): refused, nothing runs.
        body = '{"model":"psychoalign","messages":[{"role":"user","content":"hi"}]}'
        repro = {"Host": "evil.example", "Origin": "http://evil.example", "Content-Type": "text/plain"}
        refused = httpx.post(f"{url}/v1/chat/completions", content=body, headers=repro, timeout=30)
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "host_not_allowed"
        # Bodies that crashed the parser: a 400 each, and no traceback in the server's log (below).
        json_type = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
        for bomb in ("[" * 100_000, '{"model":"psychoalign","seed":' + "9" * 5000 + "}"):
            bad = httpx.post(f"{url}/v1/chat/completions", content=bomb, headers=json_type, timeout=30)
            assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_json", bad.text
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    # uvicorn re-raises the signal once it has shut down cleanly: exit by SIGTERM, no traceback.
    assert proc.returncode in (0, -signal.SIGTERM), err
    assert "Traceback" not in err
    assert "[serve-test-1] psychoalign.web.access: POST /v1/chat/completions 200" in err
    shown = cli("traces", "show", trace_id, "--config", str(config), "--json")
    assert shown.returncode == 0 and trace_id in shown.stdout


def test_serve_refuses_a_public_address_without_keys(tmp_path: Path) -> None:
    out = cli("serve", "--host", "0.0.0.0", "--port", str(free_port()), "--config", str(write_config(tmp_path)))
    assert out.returncode == 2
    assert "refusing to listen on 0.0.0.0" in out.stderr and "Traceback" not in out.stderr


async def test_connections_on_the_bound_socket_disable_nagle() -> None:
    """`serve`, `serve-a2a` and `agent serve` listen on a socket they bind themselves. Every
    connection accepted on it must have TCP_NODELAY (asyncio sets it only when the listening
    socket's proto is TCP): with Nagle on, a reply written in two parts waits for the client's
    delayed ACK, ~40 ms per request."""
    import asyncio
    import socket

    from psychoalign.cli.serve import _bind

    sock = _bind("127.0.0.1", 0)
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            conn = transport.get_extra_info("socket")
            if not accepted.done():
                accepted.set_result(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", sock.getsockname()[1])
        assert await accepted == 1
        writer.close()
    finally:
        server.close()
        await server.wait_closed()


def test_serve_grpc_port_serves_the_a2a_agent_over_grpc(tmp_path: Path) -> None:
    """`serve --grpc-port N`: the card lists the gRPC interface; the official client negotiates over
    it (keyless loopback agent); a call naming another A2A major version is refused."""
    import asyncio

    import grpc
    import grpc.aio
    from a2a.client import ClientConfig as Config
    from a2a.types import GetTaskRequest, a2a_pb2_grpc

    config = write_config(tmp_path)
    # A keyless agent with the local token off (serve.local_token = false): as before it, the
    # official client needs no credentials, and the banner warns.
    config.write_text(config.read_text() + "\n[serve]\nlocal_token = false\n")
    grpc_port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "psychoalign",
            "serve",
            "--port",
            "0",
            "--grpc-port",
            str(grpc_port),
            "--config",
            str(config),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )

    async def talk(url: str) -> tuple[str, grpc.StatusCode]:
        async with httpx.AsyncClient(timeout=120) as hc:
            card = await A2ACardResolver(hc, url).get_agent_card()
            assert f"127.0.0.1:{grpc_port}" in {i.url for i in card.supported_interfaces}
            config = Config(
                streaming=False,
                httpx_client=hc,
                grpc_channel_factory=grpc.aio.insecure_channel,
                supported_protocol_bindings=["GRPC"],
            )
            client = ClientFactory(config).create(card)
            tasks = [
                r.task async for r in client.send_message(user_text("How do I boil an egg?")) if r.HasField("task")
            ]
        async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
            try:
                await stub.GetTask(GetTaskRequest(id="x"), metadata=(("a2a-version", "99.0"),))
            except grpc.aio.AioRpcError as exc:
                code = exc.code()
        return get_artifact_text(tasks[-1].artifacts[0]), code

    try:
        assert proc.stderr is not None
        banner = ""
        while "deployments:" not in banner and proc.poll() is None:  # the banner may wrap
            banner += proc.stderr.readline()
        match = re.match(r"PsychoAlign on (http://127\.0\.0\.1:\d+) ", banner)
        assert match and f"A2A gRPC 127.0.0.1:{grpc_port}" in " ".join(banner.split()), banner
        banner += proc.stderr.readline()
        assert "warning: serve.local_token = false" in banner and "PSYCHOALIGN_TOKEN" not in banner, banner
        # the banner is printed before the worker starts its servers: the card answers once both run
        answer, code = asyncio.run(talk(match.group(1)))
        assert answer.startswith("Boil the egg for 6 minutes.")
        assert code == grpc.StatusCode.FAILED_PRECONDITION
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode in (0, -signal.SIGTERM), err
    assert "Traceback" not in err


def test_serve_grpc_needs_the_local_token(tmp_path: Path) -> None:
    """`serve --grpc-port N` with a keyless agent and the local token on (the default): a gRPC call
    without the banner's token, or with another, is refused UNAUTHENTICATED before any handler
    runs; with it the call is served; and a2a-version 99.0 is still refused with the token."""
    import asyncio

    import grpc
    import grpc.aio
    from a2a.types import GetTaskRequest, a2a_pb2_grpc

    grpc_port = free_port()
    args = ["serve", "--port", "0", "--grpc-port", str(grpc_port), "--config", str(write_config(tmp_path))]
    proc = subprocess.Popen(
        [sys.executable, "-m", "psychoalign", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )

    async def codes(token: str) -> dict[str, grpc.StatusCode]:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            await asyncio.wait_for(channel.channel_ready(), 120)  # the worker starts gRPC after the banner
            stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
            calls = {
                "none": (("a2a-version", "1.0"),),
                "wrong": (("authorization", "Bearer guessed"), ("a2a-version", "1.0")),
                "empty bearer": (("authorization", "Bearer "), ("a2a-version", "1.0")),
                "no token, version 99": (("a2a-version", "99.0"),),
                "token": (("authorization", f"Bearer {token}"), ("a2a-version", "1.0")),
                "token, version 99": (("authorization", f"Bearer {token}"), ("a2a-version", "99.0")),
            }
            out: dict[str, grpc.StatusCode] = {}
            for name, metadata in calls.items():
                try:
                    await stub.GetTask(GetTaskRequest(id="no-such-task"), metadata=metadata)
                    out[name] = grpc.StatusCode.OK
                except grpc.aio.AioRpcError as exc:
                    out[name] = exc.code()
            return out

    try:
        assert proc.stderr is not None
        banner = ""
        while "export PSYCHOALIGN_TOKEN=" not in banner and proc.poll() is None:
            banner += proc.stderr.readline()
        exported = re.search(r"export PSYCHOALIGN_TOKEN=(\S+) ", banner)
        assert exported and f"A2A gRPC 127.0.0.1:{grpc_port}" in " ".join(banner.split()), banner
        got = asyncio.run(codes(exported.group(1)))
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    unauthenticated = grpc.StatusCode.UNAUTHENTICATED
    assert got["none"] == got["wrong"] == got["empty bearer"] == got["no token, version 99"] == unauthenticated, got
    assert got["token"] == grpc.StatusCode.NOT_FOUND, got  # past the token: the task does not exist
    assert got["token, version 99"] == grpc.StatusCode.FAILED_PRECONDITION, got
    assert proc.returncode in (0, -signal.SIGTERM), err
    assert "Traceback" not in err


def test_serve_refuses_grpc_with_several_workers(tmp_path: Path) -> None:
    out = cli(
        "serve",
        "--port",
        "0",
        "--grpc-port",
        str(free_port()),
        "--workers",
        "2",
        "--config",
        str(write_config(tmp_path)),
    )
    assert out.returncode == 2 and "--workers 1" in out.stderr
