"""Real-model tests: the embedded models (SmolLM2-135M-Instruct by default, Gemma 3 270M base on
request) through llama-cpp-python (no network)."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel, Field

from psychoalign.models import Message, ModelSpec, build_model
from psychoalign.models.local import (
    PLAIN_REPEAT_PENALTY,
    _load,
    default_threads,
    grammar_schema,
    max_threads,
    render_prompt,
    resolve_model,
)
from psychoalign.models.schema import schema_for

pytestmark = pytest.mark.realmodel


class Rated(BaseModel):
    answer: str = Field(max_length=200)
    confidence: float = Field(ge=0, le=1)
    score: int = Field(ge=0, le=100)
    verdict: str = Field(
        pattern="^(APPROVED|CONDITIONAL|VETOED)$", json_schema_extra={"enum": ["APPROVED", "CONDITIONAL", "VETOED"]}
    )


async def test_plain_text_generation() -> None:
    model = build_model(ModelSpec(backend="local", max_tokens=24))
    result = await model.chat("What is the capital of Italy?")
    assert result.text.strip()
    assert result.usage.completion_tokens > 0
    assert result.backend == "local"


async def test_schema_valid_json_from_the_base_model() -> None:
    model = build_model(ModelSpec(backend="local", model="gemma", max_tokens=120))
    result = await model.chat("Is it fine to tell a friend the time? Rate it.", output=Rated)
    assert isinstance(result.data, Rated)
    assert 0 <= result.data.confidence <= 1 and 0 <= result.data.score <= 100
    assert result.attempts == 1  # the grammar makes the first reply parse and fit the bounds


async def test_concurrent_callers_share_one_context() -> None:
    model = build_model(ModelSpec(backend="local", max_tokens=8))
    results = await asyncio.gather(*(model.chat(f"Count to {i}.") for i in range(4)))
    serial = [await model.chat(f"Count to {i}.") for i in range(4)]
    assert [r.text for r in results] == [r.text for r in serial]  # same seed, no corrupted state


def test_grammar_schema_bounds_numbers_as_enums() -> None:
    flat = grammar_schema(schema_for(Rated))
    assert flat["properties"]["score"]["enum"] == list(range(101))
    assert flat["properties"]["confidence"]["enum"][:3] == [0, 0.01, 0.02]
    assert flat["properties"]["confidence"]["enum"][-1] == 1


def test_render_prompt_adds_preamble_only_without_system() -> None:
    msgs = (Message(role="user", content="hi"),)
    assert render_prompt(msgs).startswith("The following is a conversation")
    with_sys = (Message(role="system", content="SYS"), *msgs)
    assert render_prompt(with_sys).startswith("SYS") and render_prompt(with_sys).endswith("Assistant:")


def test_smollm2_is_rendered_through_its_own_chat_template() -> None:
    name, path = resolve_model(None)
    assert name == "smollm2-135m-instruct" and path.suffix == ".gguf"
    loaded = _load(path, 4096, None)
    prompt, stops = loaded.render((Message(role="system", content="S"), Message(role="user", content="hi")))
    assert prompt == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert "<|im_end|>" in stops
    assert 1 <= loaded.llama.n_threads <= max_threads()  # chosen from the idle cores at load time
    assert 1 <= default_threads() <= max_threads()


async def test_smollm2_answers_on_topic() -> None:
    model = build_model(ModelSpec(backend="local", max_tokens=80))
    result = await model.chat("How do I boil an egg?")
    assert result.model == "smollm2-135m-instruct"
    assert "egg" in result.text.lower()


async def test_plain_reply_is_what_llama_cpp_gives_for_the_same_request() -> None:
    """The layer adds policy around llama.cpp, not changes to the request: its greedy plain reply is
    byte-identical to a direct call with the chat-templated prompt, the end-of-turn stop, the
    repetition penalty and the spec's sampling settings (bench/models.py times the two against
    each other on this premise)."""
    spec = ModelSpec(backend="local", max_tokens=24, seed=0)
    model = build_model(spec)
    question = "Write two sentences about the history of tea."
    loaded = _load(resolve_model(None)[1], spec.n_ctx, spec.n_threads)
    prompt, stops = loaded.render((Message(role="user", content=question),))
    with loaded.lock:
        loaded.llama.reset()
        direct = loaded.llama.create_completion(
            prompt,
            max_tokens=spec.max_tokens,
            temperature=spec.temperature,
            seed=spec.seed,
            repeat_penalty=PLAIN_REPEAT_PENALTY,
            stop=stops,
            stream=False,
        )
        loaded.llama.reset()
    assert isinstance(direct, dict)
    result = await model.chat(question)
    assert result.text == direct["choices"][0]["text"].strip()
    assert result.usage.completion_tokens == direct["usage"]["completion_tokens"] > 0
    assert result.usage.prompt_tokens == direct["usage"]["prompt_tokens"]


#: Loads the embedded model in a fresh interpreter, runs the exit hooks as interpreter shutdown
#: does, and reports whether llama.cpp's model was freed by them (not left to shutdown's garbage
#: collection, where llama_cpp's module may already be emptied and free_model raises TypeError).
_EXIT_SCRIPT = """
import atexit
from psychoalign.models.local import _MODELS, _load, resolve_model

loaded = _load(resolve_model(None)[1], 2048, None)
inner = loaded.llama._model
assert inner.model is not None
atexit._run_exitfuncs()
print("freed" if inner.model is None and not _MODELS else "still loaded")
"""


def test_the_loaded_model_is_freed_by_an_exit_hook_and_exit_is_silent() -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", _EXIT_SCRIPT], capture_output=True, text=True, env=env, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "freed"
    assert "Traceback" not in out.stderr and "TypeError" not in out.stderr, out.stderr


def test_closing_models_twice_and_loading_again_works() -> None:
    from psychoalign.models.local import close_models

    path = resolve_model(None)[1]
    first = _load(path, 2048, None)
    close_models()
    close_models()  # idempotent: nothing left to free
    again = _load(path, 2048, None)
    assert again is not first and again.llama.tokenize(b"hi")


async def test_reset_prompt_cache_forgets_the_tokens_llama_cpp_kept() -> None:
    """llama.cpp reuses the kept tokens (``Llama.n_tokens`` of them) as a prompt prefix; after
    ``reset_prompt_cache`` none are kept, so the next call evaluates its whole prompt."""
    spec = ModelSpec(backend="local", max_tokens=4, seed=0)
    model = build_model(spec)
    await model.chat("Name a colour.")
    loaded = _load(resolve_model(None)[1], spec.n_ctx, spec.n_threads)
    assert loaded.llama.n_tokens > 0
    model.backend.reset_prompt_cache()
    assert loaded.llama.n_tokens == 0
