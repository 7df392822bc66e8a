"""Request-level tension definitions, re-exported: they live in :mod:`psychoalign.traces.tension`
so that the negotiation's cross-turn track (docs/negotiation.md) reads a turn's T the same way the
boundary analysis does, without importing the experiment harness."""

from __future__ import annotations

from ....traces.tension import DEFAULT_DEFINITION, TensionDefinition, all_tensions, request_tension

__all__ = ["DEFAULT_DEFINITION", "TensionDefinition", "all_tensions", "request_tension"]
