"""The gRPC binding as the CLI serves it: the interface its card advertises, and what the service
says when it starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, a2a_pb2_grpc
from a2a.utils import TransportProtocol
from starlette.testclient import TestClient

from psychoalign.a2a.grpc_binding import build_grpc_server
from psychoalign.a2a.server import CARD_PATH
from psychoalign.cli import a2a as a2a_cli
from psychoalign.models import ChatModel, ModelSpec, ScriptedBackend
from tests.loopback import free_port


def _grpc_url(seen: dict[str, Any]) -> str:
    """The gRPC interface's URL in the card the app serves."""
    card = TestClient(seen["app"]).get(CARD_PATH).json()
    (grpc,) = [i for i in card["supportedInterfaces"] if i["protocolBinding"] == TransportProtocol.GRPC]
    assert grpc["protocolVersion"] == "1.0"
    return str(grpc["url"])


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    """The app each command would serve, and the host and gRPC port it would bind (nothing is
    served: ``_serve`` is replaced by a recorder; the DRIVE's model is scripted)."""
    monkeypatch.setenv("PSYCHOALIGN_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("PSYCHOALIGN_A2A__TOKENS__DRIVE", "d")
    monkeypatch.setenv("PSYCHOALIGN_A2A__TOKENS__USER", "u")
    spec = ModelSpec(backend="scripted", model="drive")
    monkeypatch.setattr(a2a_cli, "build_model", lambda *a, **k: ChatModel(spec, ScriptedBackend(spec, replies=[])))
    seen: dict[str, Any] = {}

    def record(app: Any, sock: Any, host: str, grpc_port: int | None = None) -> None:
        seen.update(app=app, host=host, grpc_port=grpc_port)
        sock.close()

    monkeypatch.setattr(a2a_cli, "_serve", record)
    return seen


def test_role_card_advertises_grpc_at_the_public_host_not_the_bind_address(served: dict[str, Any]) -> None:
    """With --public-url the card's JSON-RPC and HTTP+JSON URLs name the public host; the gRPC
    interface named the bind address (127.0.0.1:9101), which no remote client can reach."""
    a2a_cli.agent_serve(
        role="drive",
        host="127.0.0.1",
        port=0,
        public_url="https://drive.example.org",
        grpc_port=9101,
        insecure=False,
        config=None,
    )
    assert _grpc_url(served) == "drive.example.org:9101"
    assert served["host"] == "127.0.0.1" and served["grpc_port"] == 9101  # still bound where asked


def test_system_card_advertises_grpc_at_the_public_host(served: dict[str, Any]) -> None:
    a2a_cli.serve_a2a(
        host="127.0.0.1",
        port=0,
        deployment="psychoalign",
        framework=None,
        public_url="http://[2001:db8::1]:8100",
        grpc_port=9100,
        insecure=False,
        config=None,
    )
    assert _grpc_url(served) == "[2001:db8::1]:9100"


def test_without_a_public_url_the_card_names_the_bind_address(served: dict[str, Any]) -> None:
    a2a_cli.agent_serve(
        role="drive", host="127.0.0.1", port=0, public_url=None, grpc_port=9101, insecure=False, config=None
    )
    assert _grpc_url(served) == "127.0.0.1:9101"


async def test_a_grpc_port_another_service_holds_is_refused() -> None:
    """gRPC binds with SO_REUSEPORT unless told not to: a second service given the same
    --grpc-port started without a word, and the kernel spread calls over both (a DRIVE and an
    EVALUATOR on one port: each client call reached either, at random)."""
    handler: Any = object()  # never called: nothing is served
    address = f"127.0.0.1:{free_port()}"
    first = build_grpc_server(handler, address, None)
    await first.start()
    try:
        with pytest.raises(OSError, match=rf"cannot bind gRPC to {address}"):
            build_grpc_server(handler, address, None)
    finally:
        await first.stop(None)


def test_the_cli_names_a_grpc_port_in_use_in_one_line() -> None:
    """`agent serve` / `serve-a2a` with a --grpc-port another service holds: a one-line error
    naming the port and what to do (it was "error: OSError: — check the path or address")."""
    import socket
    from types import SimpleNamespace

    from psychoalign.errors import ConfigError

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    taken = holder.getsockname()[1]
    state = SimpleNamespace(a2a_handler=object(), a2a_auth=None, a2a_max_body_bytes=1000)
    sock = socket.socket()
    try:
        why = rf"cannot bind gRPC to 127\.0\.0\.1:{taken}: the port is in use"
        with pytest.raises(ConfigError, match=why) as caught:
            a2a_cli._serve(SimpleNamespace(state=state), sock, "127.0.0.1", taken)
        assert "--grpc-port" in (caught.value.hint or "")
    finally:
        holder.close()
        sock.close()


@pytest.mark.parametrize(
    ("request_", "named"),
    [
        (SendMessageRequest(), "message: Field is required"),
        (SendMessageRequest(message=Message(role=Role.ROLE_USER, parts=[Part(text="hi")])), "message.message_id"),
        (GetTaskRequest(), "id: Field is required"),
    ],
)
async def test_a_request_missing_a_required_field_is_invalid_argument_naming_the_field(
    request_: Any, named: str
) -> None:
    """The status message named no field ("Validation failed"): only the BadRequest detail in the
    trailing metadata did, which a raw gRPC client (and its logs) does not show."""
    from tests.a2a.test_conformance import system_agent

    async with system_agent() as agent, grpc.aio.insecure_channel(agent.grpc_url) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        method = stub.GetTask if isinstance(request_, GetTaskRequest) else stub.SendMessage
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await method(request_, metadata=(("authorization", "Bearer tok"),))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert named in (caught.value.details() or "")
        assert agent.world.calls["drive"] == 0
