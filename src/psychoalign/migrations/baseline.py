"""Each store's tables as they stood before migrations: what the store's revision 0001 creates
where missing (:func:`~psychoalign.migrations.bring_up`), one ``MetaData`` per store.

History, like every revision: never edit it. A change to a store's tables is a new revision of
that store (CONTRIBUTING.md), and the store's code defines its tables as they are now.
"""

from __future__ import annotations

import sqlalchemy as sa

traces = sa.MetaData()
sa.Table(
    "psychoalign_traces",
    traces,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, index=True),
    sa.Column("finished_at", sa.DateTime(timezone=True)),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("owner", sa.String(300), nullable=False),
    sa.Column("request", sa.Text, nullable=False),
    sa.Column("framework", sa.String(200)),
    sa.Column("state", sa.String(40)),
    sa.Column("tension", sa.Float),
    sa.Column("defense", sa.String(40)),
    sa.Column("error", sa.Text),
    sa.Column("body", sa.Text, nullable=False),
)
sa.Table(
    "psychoalign_trace_keys",
    traces,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("trace_id", sa.String(32), primary_key=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)

star = sa.MetaData()
sa.Table(
    "star_participants",
    star,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("simulated", sa.Boolean, nullable=False),
)
sa.Table(
    "star_instructions",
    star,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("campaign", sa.String(64), nullable=False, index=True),
    sa.Column("rule", sa.String(64), nullable=False),
    sa.Column("cell", sa.Text, nullable=False),
    sa.Column("record", sa.Text, nullable=False),
)
sa.Table(
    "star_tasks",
    star,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("campaign", sa.String(64), nullable=False, index=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("instruction_id", sa.String(64)),
    sa.Column("dialogue_id", sa.String(32), index=True),
    sa.Column("participant_id", sa.String(64)),
    sa.Column("requirement", sa.Text, nullable=False),
    sa.Column("relaxed", sa.Text),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("lease_expires_at", sa.DateTime(timezone=True)),
    sa.Index("ix_star_tasks_queue", "kind", "status", "created_at", "id"),
    sa.Index("ix_star_tasks_lease", "status", "lease_expires_at"),
    sa.Index("ix_star_tasks_holder", "participant_id", "status"),
)
sa.Table(
    "star_campaigns",
    star,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("settings", sa.Text, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("status", sa.String(16), nullable=False, server_default="open"),
    sa.Column("members_only", sa.Boolean, nullable=False, server_default=sa.false()),
)
sa.Table(
    "star_members",
    star,
    sa.Column("campaign", sa.String(64), nullable=False),
    sa.Column("participant_id", sa.String(64), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint("campaign", "participant_id"),
    sa.Index("ix_star_members_participant", "participant_id"),
)
sa.Table(
    "star_target_failures",
    star,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("dialogue_id", sa.String(32), nullable=False, index=True),
    sa.Column("turn_index", sa.Integer, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("trace_id", sa.String(32)),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
sa.Table(
    "star_dialogues",
    star,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("campaign", sa.String(64), nullable=False, index=True),
    sa.Column("instruction_id", sa.String(64), nullable=False),
    sa.Column("task_id", sa.String(32), nullable=False, unique=True),
    sa.Column("red_teamer_id", sa.String(64), nullable=False),
    sa.Column("target", sa.String(200), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("pre_annotation", sa.Text),
    sa.Column("refused", sa.Boolean, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
sa.Table(
    "star_turns",
    star,
    sa.Column("dialogue_id", sa.String(32), nullable=False),
    sa.Column("idx", sa.Integer, nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("tension", sa.Float),
    sa.Column("state", sa.String(40)),
    sa.Column("trace_id", sa.String(32)),
    sa.Column("refused", sa.Boolean),
    sa.PrimaryKeyConstraint("dialogue_id", "idx"),
)
sa.Table(
    "star_annotations",
    star,
    sa.Column("dialogue_id", sa.String(32), nullable=False),
    sa.Column("participant_id", sa.String(64), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("rating", sa.Integer, nullable=False),
    sa.Column("reasoning", sa.Text, nullable=False),
    sa.Column("task_id", sa.String(32), nullable=False, unique=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint("dialogue_id", "participant_id"),
)
sa.Table(
    "star_exposures",
    star,
    sa.Column("dialogue_id", sa.String(32), nullable=False),
    sa.Column("participant_id", sa.String(64), nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.PrimaryKeyConstraint("dialogue_id", "participant_id"),
    sa.Index("ix_star_exposures_participant", "participant_id"),
)
sa.Table(
    "star_declines",
    star,
    sa.Column("instruction_id", sa.String(64), nullable=False),
    sa.Column("participant_id", sa.String(64), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint("instruction_id", "participant_id"),
)

lab = sa.MetaData()
sa.Table(
    "web_campaigns",
    lab,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
sa.Table(
    "web_task_time",
    lab,
    sa.Column("task_id", sa.String(32), nullable=False),
    sa.Column("participant_id", sa.String(64), nullable=False),
    sa.Column("campaign", sa.String(64), nullable=False, index=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("active_since", sa.DateTime(timezone=True)),
    sa.Column("seconds", sa.Float, nullable=False),
    sa.Column("topic", sa.Text),
    sa.PrimaryKeyConstraint("task_id", "participant_id"),
)

accounts = sa.MetaData()
sa.Table(
    "web_accounts",
    accounts,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("username", sa.String(64), unique=True),
    sa.Column("display_name", sa.String(200), nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("participant_id", sa.String(64), unique=True),
    sa.Column("password_hash", sa.Text),
    sa.Column("active", sa.Boolean, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
sa.Table(
    "web_invites",
    accounts,
    sa.Column("token_hash", sa.String(64), primary_key=True),
    sa.Column("account_id", sa.String(32), nullable=False, index=True),
    sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("used_at", sa.DateTime(timezone=True)),
)
sa.Table(
    "web_sessions",
    accounts,
    sa.Column("token_hash", sa.String(64), primary_key=True),
    sa.Column("account_id", sa.String(32), nullable=False, index=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
)
sa.Table(
    "web_login_failures",
    accounts,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("key", sa.String(200), nullable=False, index=True),
    sa.Column("at", sa.DateTime(timezone=True), nullable=False),
)
sa.Table(
    "web_secrets",
    accounts,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(128), nullable=False),
)

experiments = sa.MetaData()
sa.Table(
    "psychoalign_experiment_runs",
    experiments,
    sa.Column("id", sa.String(120), primary_key=True),
    sa.Column("name", sa.String(120), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("spec", sa.Text, nullable=False),
    sa.Column("meta", sa.Text, nullable=False),
)
sa.Table(
    "psychoalign_experiment_cells",
    experiments,
    sa.Column("run_id", sa.String(120), primary_key=True),
    sa.Column("key", sa.String(400), primary_key=True),
    sa.Column("system", sa.String(80), nullable=False),
    sa.Column("benchmark", sa.String(80), nullable=False),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("owner", sa.String(300), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("body", sa.Text, nullable=False),
)
