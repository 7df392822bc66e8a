"""Build a :class:`ChatModel` from a :class:`ModelSpec`."""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Iterable
from pathlib import Path

from ..errors import ConfigError
from .base import Backend
from .cache import ResponseCache
from .client import ChatModel
from .spec import BACKENDS, BackendName, ModelSpec

#: Backend name -> (module beside this one, adapter class): a module and its SDK load only when used.
_ADAPTERS: dict[str, tuple[str, str]] = {
    "local": ("local", "LocalBackend"),
    "classifier": ("classifier", "ClassifierBackend"),
    "openai": ("openai_compat", "OpenAIBackend"),
    "anthropic": ("anthropic_backend", "AnthropicBackend"),
    "gemini": ("gemini_backend", "GeminiBackend"),
    "scripted": ("scripted", "ScriptedBackend"),
}


def backend_class(name: BackendName | str) -> type[Backend]:
    """The adapter class for a backend name (imports the SDK lazily)."""
    if name not in _ADAPTERS:
        raise ConfigError(f"unknown backend '{name}'", hint=f"choose one of: {', '.join(BACKENDS)}")
    module, cls = _ADAPTERS[name]
    adapter: type[Backend] = getattr(importlib.import_module(f".{module}", __package__), cls)
    return adapter


def build_model(spec: ModelSpec, *, cache_dir: str | Path | None = None) -> ChatModel:
    """A ready :class:`ChatModel`; with ``cache_dir`` replies are cached on disk under it."""
    backend = backend_class(spec.backend)(spec)
    cache = ResponseCache(Path(cache_dir) / "responses.sqlite") if cache_dir is not None else None
    return ChatModel(spec, backend, cache=cache)


def preload(specs: Iterable[ModelSpec]) -> list[threading.Thread]:
    """Start loading each spec's backend (:meth:`Backend.preload`: the embedded model's weights,
    the classifier's encoder) in a thread of its own, and return the threads.

    A process that needs these loads soon (``psychoalign negotiate``) starts them first and does
    its other start-up work (imports, the trace store) meanwhile; the first call finds them
    ready, or waits for the rest. The threads are not daemons, so the process never exits in the
    middle of a load. A failure is only logged: the first call loads again and raises it."""
    threads = []
    for spec in specs:
        thread = threading.Thread(target=_preload, args=(spec,), name=f"preload-{spec.backend}")
        thread.start()
        threads.append(thread)
    return threads


def _preload(spec: ModelSpec) -> None:
    try:
        backend_class(spec.backend)(spec).preload()
    except Exception:  # the first real call loads again and raises it, where it can be reported
        logging.getLogger(__name__).debug("preloading %s failed", spec.label(), exc_info=True)


def resolved_label(spec: ModelSpec) -> str:
    """``backend:model`` as a trace records it (embedded model name, classifier version@hash),
    without loading any weights; falls back to the spec's own label when the backend cannot be
    built here (missing package or key)."""
    from ..errors import PsychoAlignError

    try:
        backend = backend_class(spec.backend)(spec)
    except PsychoAlignError:
        return spec.label()
    return f"{backend.name}:{backend.model_name}"
