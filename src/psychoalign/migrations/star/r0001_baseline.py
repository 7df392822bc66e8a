"""Baseline: the STAR store as it stood before migrations. Older stores lack what was added in
place since: star_tasks.lease_expires_at, star_turns.refused, star_campaigns.status (existing
campaigns open) and .members_only (off), the tables star_campaigns, star_target_failures,
star_declines and star_members, and the claim-queue, lease, holder and participant indexes."""

from __future__ import annotations

from psychoalign.migrations import baseline, bring_up

revision = "0001"
down_revision = None


def upgrade() -> None:
    bring_up(baseline.star)
