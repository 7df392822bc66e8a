"""Negotiation traces and where they are stored."""

from typing import TYPE_CHECKING

from .model import Trace, TraceStatus

if TYPE_CHECKING:
    from .store import InMemoryTraceStore, SQLTraceStore, TraceStore, open_store

_STORE = ("InMemoryTraceStore", "SQLTraceStore", "TraceStore", "open_store")


def __getattr__(name: str) -> object:
    # The stores pull in SQLAlchemy (about a second of a CLI process): loaded on first use, so
    # that reading the trace model (`negotiate` before its models start loading) stays light.
    if name in _STORE:
        from . import store

        return getattr(store, name)
    raise AttributeError(f"module 'psychoalign.traces' has no attribute '{name}'")


__all__ = ["InMemoryTraceStore", "SQLTraceStore", "Trace", "TraceStatus", "TraceStore", "open_store"]
