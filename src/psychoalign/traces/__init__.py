"""Negotiation traces and where they are stored."""

from typing import TYPE_CHECKING

from ..lazy import lazy_exports
from .model import Trace, TraceStatus

if TYPE_CHECKING:
    from .store import InMemoryTraceStore, SQLTraceStore, TraceStore, open_store

# The stores pull in SQLAlchemy (about a second of a CLI process): loaded on first use, so that
# reading the trace model (`negotiate` before its models start loading) stays light.
__getattr__ = lazy_exports(
    __name__, dict.fromkeys(("InMemoryTraceStore", "SQLTraceStore", "TraceStore", "open_store"), ".store")
)


__all__ = ["InMemoryTraceStore", "SQLTraceStore", "Trace", "TraceStatus", "TraceStore", "open_store"]
