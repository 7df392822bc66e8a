"""Baseline: the trace store as it stood before migrations. Databases from before the cross-turn
track lack psychoalign_trace_keys."""

from __future__ import annotations

from psychoalign.migrations import baseline, bring_up

revision = "0001"
down_revision = None


def upgrade() -> None:
    bring_up(baseline.traces)
