"""Baseline: the experiment result store as it stood before migrations."""

from __future__ import annotations

from psychoalign.migrations import baseline, bring_up

revision = "0001"
down_revision = None


def upgrade() -> None:
    bring_up(baseline.experiments)
