"""Baseline: the lab's accounts, invitations, sessions, login failures and server secrets as they
stood before migrations."""

from __future__ import annotations

from psychoalign.migrations import baseline, bring_up

revision = "0001"
down_revision = None


def upgrade() -> None:
    bring_up(baseline.accounts)
