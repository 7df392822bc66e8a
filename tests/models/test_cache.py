"""The on-disk reply cache: a model whose script or weights file changed in place is another
model, so its calls never return the old file's cached replies; an embedded model's GGUF content
and the load parameters that change a reply (``n_ctx``) are in the key, its thread count is not."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from psychoalign.models import ChatModel, ModelSpec, ScriptedBackend
from psychoalign.models import cache as cache_module
from psychoalign.models.cache import ResponseCache, cache_key, file_fingerprint
from psychoalign.models.identity import model_digest, model_identity
from psychoalign.models.local import LocalBackend
from psychoalign.models.openai_compat import OpenAIBackend
from psychoalign.models.types import ChatRequest, Completion, Message


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


# -- an embedded (llama.cpp) model: its GGUF content and load parameters ------------------------

_REQUEST = ChatRequest(messages=(Message(role="user", content="hi"),))
#: The key of an endpoint model's request as it was before load parameters joined the key: an
#: endpoint loads nothing, so its cached replies must keep hitting.
_ENDPOINT_KEY = "cefbc3fcb126a3bc93a0c591a708fc9a082facb58a18ca0c8892854bb28e45cd"


def _gguf(path: Path, template: str, *, pad_to: int = 0, vocab: int = 0) -> Path:
    """A minimal GGUF v3 file: a token array of ``vocab`` entries, then a chat template, then
    zeros up to ``pad_to`` bytes (where a real file's tensors would be)."""

    def text(s: str) -> bytes:
        raw = s.encode()
        return struct.pack("<Q", len(raw)) + raw

    tokens = (
        text("tokenizer.ggml.tokens")
        + struct.pack("<IIQ", 9, 8, vocab)
        + b"".join(text(f"tok{i:06d}") for i in range(vocab))
    )
    chat = text("tokenizer.chat_template") + struct.pack("<I", 8) + text(template)
    body = b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + tokens + chat
    path.write_bytes(body + b"\0" * max(0, pad_to - len(body)))
    return path


def _key(spec: ModelSpec) -> str:
    return cache_key(spec, _REQUEST, LocalBackend(spec))


def test_an_embedded_models_n_ctx_is_in_the_key_and_its_thread_count_is_not(tmp_path: Path) -> None:
    gguf = str(_gguf(tmp_path / "m.gguf", "{{ messages }}"))
    base = _key(ModelSpec(backend="local", model=gguf))
    assert _key(ModelSpec(backend="local", model=gguf, n_ctx=2048)) != base
    # threads split work, not arithmetic order (LocalBackend.load_identity): the cache holds
    assert _key(ModelSpec(backend="local", model=gguf, n_threads=1)) == base
    assert _key(ModelSpec(backend="local", model=gguf, n_threads=4)) == base


def test_a_spec_that_sets_max_tokens_keys_apart_from_the_plain_text_cap(tmp_path: Path) -> None:
    """Unset, plain replies stop at PLAIN_MAX_TOKENS although the request says 512; set to 512,
    they may run to 512: the same request, two replies."""
    gguf = str(_gguf(tmp_path / "m.gguf", "{{ messages }}"))
    assert _key(ModelSpec(backend="local", model=gguf)) != _key(ModelSpec(backend="local", model=gguf, max_tokens=512))


def test_another_gguf_under_the_same_name_is_another_model(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = _gguf(tmp_path / "a" / "model.gguf", "template one")
    other = _gguf(tmp_path / "b" / "model.gguf", "template two")
    spec_a, spec_b = ModelSpec(backend="local", model=str(first)), ModelSpec(backend="local", model=str(other))
    assert LocalBackend(spec_a).model_name == LocalBackend(spec_b).model_name == "model"
    assert _key(spec_a) != _key(spec_b)
    assert model_identity(spec_a, LocalBackend(spec_a)) != model_identity(spec_b, LocalBackend(spec_b))
    assert model_digest(spec_a, LocalBackend(spec_a)) != model_digest(spec_b, LocalBackend(spec_b))
    # the same bytes elsewhere are the same model
    twin = tmp_path / "twin.gguf"
    twin.write_bytes(first.read_bytes())
    assert model_identity(spec_a)["gguf"] == model_identity(ModelSpec(backend="local", model=str(twin)))["gguf"]


def test_a_large_ggufs_chat_template_past_the_first_mib_changes_its_fingerprint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large file is hashed by parts; a GGUF's metadata is one of them whole, as a template sits
    after the vocabulary, past the first MiB (1.7 MB into SmolLM2's file)."""
    monkeypatch.setattr(cache_module, "_WHOLE_FILE", 2 << 20)  # "large" without writing 64 MiB
    size = 3 << 20
    one = _gguf(tmp_path / "one.gguf", "{{ A }}", pad_to=size, vocab=120_000)
    two = _gguf(tmp_path / "two.gguf", "{{ B }}", pad_to=size, vocab=120_000)
    assert one.stat().st_size == two.stat().st_size == size
    head = 1 << 20
    assert one.read_bytes()[:head] == two.read_bytes()[:head] and one.read_bytes()[-head:] == two.read_bytes()[-head:]
    assert file_fingerprint(str(one)) != file_fingerprint(str(two))
    # a large file that is no GGUF is still hashed by its size, first and last MiB
    plain = tmp_path / "blob.bin"
    plain.write_bytes(b"x" * size)
    assert file_fingerprint(str(plain)) is not None


async def test_old_entries_of_an_embedded_model_miss_and_an_endpoints_keep_hitting(tmp_path: Path) -> None:
    gguf = str(_gguf(tmp_path / "m.gguf", "{{ messages }}"))
    spec = ModelSpec(backend="local", model=gguf)
    cache = ResponseCache(tmp_path / "cache.db")
    old = cache_key(spec, _REQUEST)  # the key before load parameters counted
    await cache.put(old, Completion(text="an answer under another n_ctx", model="m"))
    assert _key(spec) != old and await cache.get(_key(spec)) is None
    endpoint = ModelSpec(backend="openai", model="gpt-x", base_url="http://127.0.0.1:1/v1")
    assert cache_key(endpoint, _REQUEST) == _ENDPOINT_KEY
    assert cache_key(endpoint, _REQUEST, OpenAIBackend(endpoint)) == _ENDPOINT_KEY
