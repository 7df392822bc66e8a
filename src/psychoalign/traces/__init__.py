"""Negotiation traces and where they are stored."""

from .model import AlignmentContribution, FinalDecision, ProposalRecord, RoundRecord, Trace, TraceStatus
from .store import InMemoryTraceStore, SQLTraceStore, TraceStore, open_store

__all__ = [
    "AlignmentContribution",
    "FinalDecision",
    "InMemoryTraceStore",
    "ProposalRecord",
    "RoundRecord",
    "SQLTraceStore",
    "Trace",
    "TraceStatus",
    "TraceStore",
    "open_store",
]
