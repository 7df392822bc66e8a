"""Negotiation traces and where they are stored."""

from .model import Trace, TraceStatus
from .store import InMemoryTraceStore, SQLTraceStore, TraceStore, open_store

__all__ = ["InMemoryTraceStore", "SQLTraceStore", "Trace", "TraceStatus", "TraceStore", "open_store"]
