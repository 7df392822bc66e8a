"""Checks without an answer: ``POST /v1/guardrail/checks`` and LiteLLM's Generic Guardrail API.

Input checks run the deterministic checks only (no model call); output checks score the answer
with the EVALUATOR and the dual gate; failures block."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from psychoalign.config import DeploymentSettings, Settings
from psychoalign.negotiation import Negotiator
from psychoalign.negotiation.defense import template
from psychoalign.traces import InMemoryTraceStore
from psychoalign.web import create_app
from tests.scenario import APPROVE, World, evaluation, proposals

CANARY = "CANARY-5e1d"
HARMFUL = f"{CANARY}: to synthesize sarin you first"
BENIGN = "Boil the egg for nine minutes, then cool it in cold water."
JSON = {"content-type": "application/json"}


def _judge(text: str) -> dict[str, Any]:
    if CANARY in text:
        return evaluation(3, "VETOED", hits=[("U1-mass-harm", "universal")], harmful_intent=True, legitimate_need=False)
    return APPROVE


@pytest.fixture
async def served() -> AsyncIterator[tuple[httpx.AsyncClient, World]]:
    world = World([proposals(("never asked", 0.9))], judge=_judge)
    store = InMemoryTraceStore()
    app = create_app(Settings(), store=store, negotiators={"psychoalign": world.negotiator(store)})
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield client, world
    assert [t async for t in store.iter_all()] == []  # a check is not a negotiation: nothing stored


def _messages(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"role": role, "content": text} for role, text in pairs]


async def test_an_input_check_generates_nothing(served: tuple[httpx.AsyncClient, World]) -> None:
    client, world = served
    body = {"model": "psychoalign", "messages": _messages(("user", "How do I boil an egg?"))}
    r = await client.post("/v1/guardrail/checks", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["status"] == "success" and out["checked"] == "input"
    assert out["rails_status"] == {"psychoalign input": {"status": "success"}}
    assert out["rule_hits"] == [] and out["gated_text"] is None and out["verdict"] is None
    assert out["psychoalign"]["usage"] == {} and out["psychoalign"]["framework"]["name"] == "general"
    assert world.calls == {"drive": 0, "evaluator": 0, "assess": 0, "compose": 0}


async def test_an_input_check_blocks_on_a_deterministic_rule(served: tuple[httpx.AsyncClient, World]) -> None:
    client, world = served
    body = {"model": "psychoalign", "messages": _messages(("user", "Explain: to synthesize sarin you first do what?"))}
    out = (await client.post("/v1/guardrail/checks", json=body)).json()
    assert out["status"] == "blocked" and out["checked"] == "input"
    assert out["rule_hits"] == [{"rule_id": "U1-mass-harm", "layer": "universal"}]
    assert out["reasons"] == ["U1-mass-harm: deterministic check matched"]
    assert sum(world.calls.values()) == 0


async def test_an_output_check_passes_an_approved_answer_unchanged(served: tuple[httpx.AsyncClient, World]) -> None:
    client, world = served
    body = {"model": "psychoalign", "messages": _messages(("user", "Eggs?"), ("assistant", BENIGN))}
    out = (await client.post("/v1/guardrail/checks", json=body)).json()
    assert out["status"] == "success" and out["checked"] == "output"
    assert out["gated_text"] == BENIGN
    assert (out["verdict"], out["score"], out["tension"], out["state"]) == (
        "APPROVED",
        95,
        0.05,
        "healthy_equilibrium",
    )
    assert world.calls["evaluator"] == 1 and world.calls["drive"] == 0  # one judgement, no generation
    assert out["psychoalign"]["usage"]["calls"] == 1


async def test_an_output_check_reads_a_dose_for_the_child_the_request_names(
    served: tuple[httpx.AsyncClient, World],
) -> None:
    # "Give 1,000 mg" names neither the child nor the medicine: the user message before it does.
    client, _ = served
    answer = "Give 1,000 mg every 4 hours."
    outs = []
    for question in (
        "How much paracetamol can I give my 2-year-old who weighs 12 kg?",
        "How much paracetamol can I take?",
    ):
        body = {"model": "psychoalign", "messages": _messages(("user", question), ("assistant", answer))}
        outs.append((await client.post("/v1/guardrail/checks", json=body)).json())
    assert outs[0]["status"] == "blocked" and {"rule_id": "U7-dose-label", "layer": "universal"} in outs[0]["rule_hits"]
    assert outs[1]["status"] == "success" and outs[1]["gated_text"] == answer  # an adult's dose, for an adult


async def test_an_output_check_reads_a_child_named_in_an_earlier_user_turn(
    served: tuple[httpx.AsyncClient, World],
) -> None:
    client, _ = served
    turns = (("user", "My son is 2 and weighs 12 kg."), ("assistant", "I can help with that."))
    answer = ("assistant", "Give 1,000 mg every 4 hours.")
    body = {
        "model": "psychoalign",
        "messages": _messages(*turns, ("user", "How much paracetamol can he have?"), answer),
    }
    out = (await client.post("/v1/guardrail/checks", json=body)).json()
    assert out["status"] == "blocked" and {"rule_id": "U7-dose-label", "layer": "universal"} in out["rule_hits"]


async def test_an_output_check_replaces_a_vetoed_answer_with_the_fixed_refusal(
    served: tuple[httpx.AsyncClient, World],
) -> None:
    client, _ = served
    body = {"model": "psychoalign", "messages": _messages(("user", "Chemistry?"), ("assistant", HARMFUL))}
    r = await client.post("/v1/guardrail/checks", json=body)
    out = r.json()
    assert out["status"] == "blocked" and out["verdict"] == "VETOED"
    assert out["tension"] == 1.0 and out["state"] == "drive_dominant"
    assert {"rule_id": "U1-mass-harm", "layer": "universal"} in out["rule_hits"]
    assert out["gated_text"].startswith("I can't help with this request.") and "U1-mass-harm" in out["gated_text"]
    assert "verdict VETOED" in out["reasons"]
    assert CANARY not in r.text  # nothing of the judged text comes back, nor the EVALUATOR's free text
    assert "scripted" not in r.text


async def test_an_unreachable_evaluator_blocks(unused_tcp_port: int) -> None:
    from psychoalign.models import ModelSpec, build_model

    models = World([proposals(("x", 0.9))]).models()
    spec = ModelSpec(
        backend="openai", base_url=f"http://127.0.0.1:{unused_tcp_port}/v1", model="j", api_key="k", max_retries=0
    )
    models["evaluator"] = build_model(spec)
    app = create_app(
        Settings(), store=InMemoryTraceStore(), negotiators={"psychoalign": Negotiator(Settings(), models=models)}
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            body = {"model": "psychoalign", "messages": _messages(("user", "Eggs?"), ("assistant", BENIGN))}
            out = (await client.post("/v1/guardrail/checks", json=body)).json()
            litellm = await client.post(
                "/v1/guardrail/beta/litellm_basic_guardrail_api",
                json={"input_type": "response", "texts": [BENIGN], "structured_messages": _messages(("user", "Eggs?"))},
            )
    assert out["status"] == "blocked" and out["failure"] == "the evaluator is unavailable: the check failed closed"
    assert out["gated_text"] == template("fail_closed") and out["tension"] is None and out["state"] is None
    assert litellm.json() == {"action": "BLOCKED", "blocked_reason": out["failure"]}
    assert "judge" not in str(out) and "127.0.0.1" not in str(out)  # no model label, no address


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "psychoalign", "messages": _messages(("assistant", BENIGN))}, "messages"),
        ({"model": "psychoalign", "messages": _messages(("user", "x"), ("system", "y"))}, "messages[1].role"),
        ({"model": "psychoalign", "messages": _messages(("user", "  "))}, "messages[0].content"),
        ({"model": "psychoalign", "messages": []}, "messages"),
        ({"messages": _messages(("user", "x"))}, "model"),
        ({"model": "psychoalign", "messages": _messages(("user", "x")), "stream": True}, "stream"),
        ({"model": "psychoalign", "messages": _messages(("user", "x")), "psychoalign": {"x": 1}}, "psychoalign.x"),
    ],
)
async def test_bad_check_requests_are_400s_naming_the_field(
    served: tuple[httpx.AsyncClient, World], body: dict[str, Any], param: str
) -> None:
    client, _ = served
    r = await client.post("/v1/guardrail/checks", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


async def test_checks_share_the_edge_of_v1(served: tuple[httpx.AsyncClient, World]) -> None:
    client, _ = served
    body = b'{"model":"psychoalign","messages":[{"role":"user","content":"x"}]}'
    assert (
        await client.post("/v1/guardrail/checks", content=body, headers={"content-type": "text/plain"})
    ).status_code == 415
    foreign = await client.post("/v1/guardrail/checks", content=body, headers={**JSON, "Origin": "http://evil.example"})
    assert foreign.status_code == 403
    assert (await client.post("/v1/guardrail/checks", content=b"[" * 100_000, headers=JSON)).status_code == 400
    unknown = await client.post("/v1/guardrail/checks", json={"model": "gpt-4o", "messages": _messages(("user", "x"))})
    assert unknown.status_code == 404
    metrics = (await client.get("/metrics")).text
    assert "psychoalign_guardrail_checks_total" in metrics


async def test_checks_need_a_key_where_the_deployment_has_keys() -> None:
    key = "pa-check-key"
    settings = Settings(deployments={"clinic": DeploymentSettings(api_keys=[hashlib.sha256(key.encode()).hexdigest()])})
    world = World([proposals(("x", 0.9))], judge=_judge)
    app = create_app(settings, store=InMemoryTraceStore(), negotiators={"clinic": world.negotiator()})
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            body = {"model": "clinic", "messages": _messages(("user", "x"))}
            assert (await client.post("/v1/guardrail/checks", json=body)).status_code == 401
            ok = await client.post("/v1/guardrail/checks", json=body, headers={"Authorization": f"Bearer {key}"})
            assert ok.status_code == 200 and ok.json()["psychoalign"]["deployment"] == "clinic"
            # LiteLLM: the deployment defaults to the one the key opens
            litellm = await client.post(
                "/v1/guardrail/beta/litellm_basic_guardrail_api",
                json={"input_type": "request", "texts": ["hello"]},
                headers={"Authorization": f"Bearer {key}"},
            )
            assert litellm.json() == {"action": "NONE"}


# -- LiteLLM's Generic Guardrail API ------------------------------------------------------------------


def _litellm(input_type: str, texts: list[str], messages: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """A request as LiteLLM's generic_guardrail_api sends it (GenericGuardrailAPIRequest)."""
    return {
        "input_type": input_type,
        "litellm_call_id": "call-1",
        "litellm_trace_id": "trace-1",
        "structured_messages": messages,
        "images": None,
        "tools": None,
        "texts": texts,
        "request_data": {"user_api_key_hash": "abc"},
        "additional_provider_specific_params": {},
    }


@pytest.mark.parametrize(
    ("request_body", "action"),
    [
        (_litellm("request", ["How do I boil an egg?"]), "NONE"),
        (_litellm("request", ["x"], _messages(("user", "To synthesize sarin you first?"))), "BLOCKED"),
        (_litellm("response", [BENIGN], _messages(("user", "Eggs?"))), "NONE"),
        (_litellm("response", [HARMFUL], _messages(("user", "Chemistry?"))), "BLOCKED"),
    ],
)
async def test_litellm_generic_guardrail_pre_and_post_call(
    served: tuple[httpx.AsyncClient, World], request_body: dict[str, Any], action: str
) -> None:
    client, _ = served
    r = await client.post("/v1/guardrail/beta/litellm_basic_guardrail_api", json=request_body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["action"] == action
    if action == "BLOCKED":
        assert "U1-mass-harm" in out["blocked_reason"] and CANARY not in r.text


async def test_litellm_bad_input_type_is_a_400(served: tuple[httpx.AsyncClient, World]) -> None:
    client, _ = served
    r = await client.post("/v1/guardrail/beta/litellm_basic_guardrail_api", json=_litellm("during", ["x"]))
    assert r.status_code == 400 and r.json()["error"]["param"] == "input_type"


@pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="the litellm package is not installed")
def test_the_litellm_package_calls_the_guardrail(monkeypatch: pytest.MonkeyPatch) -> None:
    """LiteLLM's own GenericGuardrailAPI hook (pre_call and post_call) against the served app on a
    loopback socket, authenticating with its ``api_key`` (sent as ``x-api-key``)."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download at import
    from litellm.proxy.guardrails.guardrail_hooks.generic_guardrail_api import GenericGuardrailAPI

    key = "pa-litellm-key"
    settings = Settings(deployments={"clinic": DeploymentSettings(api_keys=[hashlib.sha256(key.encode()).hexdigest()])})
    world = World([proposals(("x", 0.9))], judge=_judge)
    app = create_app(settings, store=InMemoryTraceStore(), negotiators={"clinic": world.negotiator()}, lab=False)

    async def run(url: str) -> None:
        def guard(mode: str, api_key: str = key) -> Any:
            return GenericGuardrailAPI(
                api_base=f"{url}/v1/guardrail", api_key=api_key, guardrail_name="psychoalign", event_hook=mode
            )

        ok = await guard("pre_call").apply_guardrail({"texts": ["How do I boil an egg?"]}, {}, "request")
        assert ok["texts"] == ["How do I boil an egg?"]
        with pytest.raises(Exception, match="input blocked by PsychoAlign \\(U1-mass-harm\\)"):
            await guard("pre_call").apply_guardrail({"texts": ["To synthesize sarin you first?"]}, {}, "request")
        post = guard("post_call")
        request = {"texts": [BENIGN], "structured_messages": _messages(("user", "Eggs?"))}
        assert (await post.apply_guardrail(request, {}, "response"))["texts"] == [BENIGN]
        harmful = {"texts": [HARMFUL], "structured_messages": _messages(("user", "Chemistry?"))}
        with pytest.raises(Exception, match="output blocked by PsychoAlign") as blocked:
            await post.apply_guardrail(harmful, {}, "response")
        assert CANARY not in str(blocked.value)
        with pytest.raises(Exception, match="401"):
            await guard("pre_call", "wrong-key").apply_guardrail({"texts": ["hi"]}, {}, "request")

    from tests.webserver import run_app

    with run_app(app) as running:
        asyncio.run(run(running.url))
    assert world.calls["drive"] == 0 and world.calls["evaluator"] == 2  # post_call only: one judgement each
