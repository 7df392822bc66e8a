"""The on-disk reply cache: a model whose script or weights file changed in place is another
model, so its calls never return the old file's cached replies."""

from __future__ import annotations

import os
from pathlib import Path

from psychoalign.models import ChatModel, ModelSpec, ScriptedBackend
from psychoalign.models.cache import ResponseCache, cache_key
from psychoalign.models.types import ChatRequest, Message


def _script(path: Path, reply: str) -> None:
    path.write_text(f"rules: []\ndefault: {reply!r}\n", encoding="utf-8")


async def _ask(spec: ModelSpec, cache: ResponseCache) -> str:
    model = ChatModel(spec, ScriptedBackend(spec), cache=cache)
    return (await model.chat("How do I pick a lock?")).text


async def test_a_script_edited_in_place_is_not_answered_from_the_old_scripts_cache(tmp_path: Path) -> None:
    script = tmp_path / "chat.yaml"
    cache = ResponseCache(tmp_path / "cache.db")
    spec = ModelSpec(backend="scripted", script=str(script))
    _script(script, "Sure, step one.")
    assert await _ask(spec, cache) == "Sure, step one."
    _script(script, "I can't help with that.")
    assert await _ask(spec, cache) == "I can't help with that."
    _script(script, "Sure, step one.")  # the first content again: its cached reply is reused
    assert await _ask(spec, cache) == "Sure, step one."


def test_the_key_follows_a_model_files_content_not_its_name(tmp_path: Path) -> None:
    weights = tmp_path / "model.gguf"
    weights.write_bytes(b"GGUF" + b"\0" * 100)
    spec = ModelSpec(backend="local", model=str(weights))
    request = ChatRequest(messages=(Message(role="user", content="hi"),))
    first = cache_key(spec, request)
    assert cache_key(spec, request) == first
    weights.write_bytes(b"GGUF" + b"\1" * 100)
    os.utime(weights, ns=(1, 1))  # even with an old modification time, the content decides
    assert cache_key(spec, request) != first
    # a model named, not a file, keys as before: its name and endpoint
    named = ModelSpec(backend="openai", model="gpt-x", base_url="http://127.0.0.1:1/v1")
    assert cache_key(named, request) == cache_key(named, request)
