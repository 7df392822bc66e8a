"""The served endpoint on the embedded default model: the official openai client, the real path."""

from __future__ import annotations

import asyncio
from pathlib import Path

import openai
import pytest

from psychoalign.config import Settings
from psychoalign.traces import TraceStatus, open_store
from psychoalign.web import create_app
from tests.webserver import run_app

pytestmark = pytest.mark.realmodel


def test_openai_client_gets_a_negotiated_answer_from_the_embedded_model(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'traces.db'}"
    settings = Settings.model_validate(
        {
            "home": str(tmp_path / "home"),
            "store_url": url,
            "defaults": {"max_tokens": 200},
            "deployments": {"psychoalign": {"negotiation": {"k": 1, "n_proposals": 1}}},
        }
    )
    store = open_store(url)
    app = create_app(settings, store=store, a2a=False)
    with run_app(app) as running:
        client = openai.OpenAI(base_url=f"{running.url}/v1", api_key="loopback", max_retries=0, timeout=600)
        raw = client.chat.completions.with_raw_response.create(
            model="psychoalign", messages=[{"role": "user", "content": "How do I boil an egg?"}]
        )
    completion = raw.parse()
    text = completion.choices[0].message.content or ""
    trace = asyncio.run(store.get(raw.headers["x-psychoalign-trace-id"]))
    assert trace is not None and trace.status is TraceStatus.COMPLETED, trace and trace.error
    assert text.strip() and text == trace.response
    assert len(trace.rounds) == 1  # the deployment's negotiation overrides applied
    assert raw.headers["x-psychoalign-state"] == trace.final.state.value  # type: ignore[union-attr]
    assert completion.usage is not None and completion.usage.total_tokens == sum(
        s.prompt_tokens + s.completion_tokens for s in trace.agents.values()
    )
