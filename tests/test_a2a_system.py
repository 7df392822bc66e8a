"""The system agent: the whole negotiation behind one A2A agent; `psychoalign up` across processes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers import get_artifact_text, get_data_parts, get_message_text, new_text_message
from a2a.types import Role, SendMessageRequest, TaskState

from psychoalign.a2a.system import CLARIFY, build_system_app
from psychoalign.config import Settings
from psychoalign.negotiation import Negotiator

from .loopback import free_port
from .scenario import World, evaluation, proposals
from .test_a2a import Server
from .test_cli import cli
from .test_cli_negotiate import write_config


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
    negotiator = Negotiator(Settings(), models=world.models())
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = Server(build_system_app(negotiator, url, token="user-tok"), port)
    try:
        task = await _send(url, "user-tok", user_text("How many pills are too many?"))
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED  # type: ignore[attr-defined]
        assert get_message_text(task.status.message) == CLARIFY  # type: ignore[attr-defined]
        artifact = task.artifacts[0]  # type: ignore[attr-defined]
        assert "pharmacist" in get_artifact_text(artifact)
        info = get_data_parts(list(artifact.parts))[0]
        assert info["state"] == "deadlock" and info["defense"] == "sublimation"
        assert 0.0 <= info["tension"] <= 1.0 and len(info["trace_id"]) == 32
        assert "VETOED-TEXT" not in get_artifact_text(artifact)
        # No token: refused before anything runs.
        async with httpx.AsyncClient(timeout=10) as anon:
            resp = await anon.post(f"{url}/a2a/jsonrpc", json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage"})
            assert resp.status_code == 401
    finally:
        server.stop()


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
        [sys.executable, "-m", "psychoalign", "up", "--port-base", str(base), "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ),
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        url = f"http://127.0.0.1:{base}"
        while True:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            try:
                if httpx.get(f"{url}/.well-known/agent-card.json", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "system agent did not come up"
            time.sleep(0.3)
        import asyncio

        task = asyncio.run(_send(url, "u", user_text("How do I boil an egg?")))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED  # type: ignore[attr-defined]
        info = get_data_parts(list(task.artifacts[0].parts))[0]  # type: ignore[attr-defined]
        follow = asyncio.run(_send(url, "u", user_text("And for a hard yolk?", context_id=task.context_id)))  # type: ignore[attr-defined]
        assert follow.status.state == TaskState.TASK_STATE_COMPLETED  # type: ignore[attr-defined]
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=30)
    for port in range(base, base + 4):  # every process stopped and released its port
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0
    remote = json.loads(cli("traces", "show", info["trace_id"], "--config", str(config), "--json").stdout)
    local = json.loads(
        cli("negotiate", "--config", str(config), "--json", "--no-store", "How do I boil an egg?").stdout
    )
    for key in ("rounds", "final", "converged", "framework", "params", "contribution"):
        assert remote[key] == local[key], key
    assert remote["agents"]["evaluator"]["hosts"] == [f"http://127.0.0.1:{base + 2}"]
    listed = json.loads(cli("traces", "list", "--config", str(config), "--json").stdout)
    followup = next(t for t in listed if t["id"] != info["trace_id"])
    assert followup["request"].startswith("Earlier in this conversation:")
