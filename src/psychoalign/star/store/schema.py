"""The STAR store's tables (one SQLAlchemy ``MetaData``).

Every table and index the store uses is defined here. A database is brought up to them by the
store's migrations (``psychoalign/migrations/star``, run on open by
:func:`psychoalign.storage.migrate`): change a table here together with a new migration there.
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    false,
)

from ...storage import created_at_column, time_column

metadata = MetaData()
participants = Table(
    "star_participants",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("body", Text, nullable=False),
    Column("simulated", Boolean, nullable=False),
)
instructions = Table(
    "star_instructions",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("campaign", String(64), nullable=False, index=True),
    Column("rule", String(64), nullable=False),
    Column("cell", Text, nullable=False),
    Column("record", Text, nullable=False),
)
tasks = Table(
    "star_tasks",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("campaign", String(64), nullable=False, index=True),
    Column("kind", String(16), nullable=False),
    Column("status", String(16), nullable=False, index=True),
    Column("instruction_id", String(64)),
    Column("dialogue_id", String(32), index=True),
    Column("participant_id", String(64)),
    Column("requirement", Text, nullable=False),
    Column("relaxed", Text),
    created_at_column(),
    time_column("updated_at", nullable=False),
    time_column("lease_expires_at"),  # claimed tasks only
)
# The claim queue (next open task of a kind, oldest first), lease expiry, and "tasks I hold": each
# an index range scan instead of a table scan.
Index("ix_star_tasks_queue", tasks.c.kind, tasks.c.status, tasks.c.created_at, tasks.c.id)
Index("ix_star_tasks_lease", tasks.c.status, tasks.c.lease_expires_at)
Index("ix_star_tasks_holder", tasks.c.participant_id, tasks.c.status)
campaign_rows = Table(  # per-campaign settings the store applies (the plan itself is in star_instructions)
    "star_campaigns",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("settings", Text, nullable=False),
    created_at_column(),
    # open / paused / closed (CAMPAIGN_STATUSES); campaigns stored before it existed are open
    Column("status", String(16), nullable=False, server_default="live"),
    # only the campaign's members (star_members) take its tasks; off for campaigns stored before it existed
    Column("members_only", Boolean, nullable=False, server_default=false()),
)
members = Table(  # who belongs to a members-only campaign (a lead adds them)
    "star_members",
    metadata,
    Column("campaign", String(64), nullable=False),
    Column("participant_id", String(64), nullable=False),
    created_at_column(),
    PrimaryKeyConstraint("campaign", "participant_id"),
)
Index("ix_star_members_participant", members.c.participant_id)
target_failures = Table(  # a target that failed to answer: recorded as a failure, never as a turn
    "star_target_failures",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("dialogue_id", String(32), nullable=False, index=True),
    Column("turn_index", Integer, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("reason", Text, nullable=False),
    Column("trace_id", String(32)),
    created_at_column(),
)
dialogues = Table(
    "star_dialogues",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("campaign", String(64), nullable=False, index=True),
    Column("instruction_id", String(64), nullable=False),
    Column("task_id", String(32), nullable=False, unique=True),
    Column("red_teamer_id", String(64), nullable=False),
    Column("target", String(200), nullable=False),
    Column("status", String(16), nullable=False),
    Column("pre_annotation", Text),
    Column("refused", Boolean, nullable=False, default=False),
    created_at_column(),
)
turns = Table(
    "star_turns",
    metadata,
    Column("dialogue_id", String(32), nullable=False),
    Column("idx", Integer, nullable=False),
    Column("role", String(16), nullable=False),
    Column("text", Text, nullable=False),
    Column("tension", Float),
    Column("state", String(40)),
    Column("trace_id", String(32)),
    Column("refused", Boolean),  # target turns: did the target refuse (the shared refusal judge)
    PrimaryKeyConstraint("dialogue_id", "idx"),
)
annotation_rows = Table(
    "star_annotations",
    metadata,
    Column("dialogue_id", String(32), nullable=False),
    Column("participant_id", String(64), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("rating", Integer, nullable=False),
    Column("reasoning", Text, nullable=False),
    Column("task_id", String(32), nullable=False, unique=True),
    # an LLM persona's rating: the model that wrote it (label with digest); null for a person's
    Column("model", String(300)),
    created_at_column(),
    PrimaryKeyConstraint("dialogue_id", "participant_id"),
)
exposures = Table(  # who has seen which dialogue, in any role: the "never twice" key
    "star_exposures",
    metadata,
    Column("dialogue_id", String(32), nullable=False),
    Column("participant_id", String(64), nullable=False),
    Column("role", String(16), nullable=False),
    PrimaryKeyConstraint("dialogue_id", "participant_id"),
)
Index("ix_star_exposures_participant", exposures.c.participant_id)
declines = Table(  # red-teaming instructions a participant skipped: never offered to them again
    "star_declines",
    metadata,
    Column("instruction_id", String(64), nullable=False),
    Column("participant_id", String(64), nullable=False),
    created_at_column(),
    PrimaryKeyConstraint("instruction_id", "participant_id"),
)
