"""The gRPC binding as the CLI serves it: the interface its card advertises, and what the service
says when it starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from a2a.utils import TransportProtocol
from starlette.testclient import TestClient

from psychoalign.a2a.server import CARD_PATH
from psychoalign.cli import a2a as a2a_cli
from psychoalign.models import ChatModel, ModelSpec, ScriptedBackend


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
