-- The stores' tables at commit 206ed0d (sqlite), by freeze_schema.py

CREATE TABLE psychoalign_experiment_cells (
	run_id VARCHAR(120) NOT NULL,
	"key" VARCHAR(400) NOT NULL,
	system VARCHAR(80) NOT NULL,
	benchmark VARCHAR(80) NOT NULL,
	status VARCHAR(16) NOT NULL,
	owner VARCHAR(300) NOT NULL,
	attempts INTEGER NOT NULL,
	updated_at DATETIME NOT NULL,
	body TEXT NOT NULL,
	PRIMARY KEY (run_id, "key")
);

CREATE INDEX ix_psychoalign_experiment_cells_status ON psychoalign_experiment_cells (status);

CREATE TABLE psychoalign_experiment_runs (
	id VARCHAR(120) NOT NULL,
	name VARCHAR(120) NOT NULL,
	created_at DATETIME NOT NULL,
	spec TEXT NOT NULL,
	meta TEXT NOT NULL,
	PRIMARY KEY (id)
);

CREATE TABLE star_annotations (
	dialogue_id VARCHAR(32) NOT NULL,
	participant_id VARCHAR(64) NOT NULL,
	kind VARCHAR(16) NOT NULL,
	rating INTEGER NOT NULL,
	reasoning TEXT NOT NULL,
	task_id VARCHAR(32) NOT NULL,
	created_at DATETIME NOT NULL,
	PRIMARY KEY (dialogue_id, participant_id),
	UNIQUE (task_id)
);

CREATE TABLE star_campaigns (
	name VARCHAR(64) NOT NULL,
	settings TEXT NOT NULL,
	created_at DATETIME NOT NULL,
	status VARCHAR(16) DEFAULT 'open' NOT NULL,
	members_only BOOLEAN DEFAULT 0 NOT NULL,
	PRIMARY KEY (name)
);

CREATE TABLE star_declines (
	instruction_id VARCHAR(64) NOT NULL,
	participant_id VARCHAR(64) NOT NULL,
	created_at DATETIME NOT NULL,
	PRIMARY KEY (instruction_id, participant_id)
);

CREATE TABLE star_dialogues (
	id VARCHAR(32) NOT NULL,
	campaign VARCHAR(64) NOT NULL,
	instruction_id VARCHAR(64) NOT NULL,
	task_id VARCHAR(32) NOT NULL,
	red_teamer_id VARCHAR(64) NOT NULL,
	target VARCHAR(200) NOT NULL,
	status VARCHAR(16) NOT NULL,
	pre_annotation TEXT,
	refused BOOLEAN NOT NULL,
	created_at DATETIME NOT NULL,
	PRIMARY KEY (id),
	UNIQUE (task_id)
);

CREATE INDEX ix_star_dialogues_campaign ON star_dialogues (campaign);

CREATE TABLE star_exposures (
	dialogue_id VARCHAR(32) NOT NULL,
	participant_id VARCHAR(64) NOT NULL,
	role VARCHAR(16) NOT NULL,
	PRIMARY KEY (dialogue_id, participant_id)
);

CREATE INDEX ix_star_exposures_participant ON star_exposures (participant_id);

CREATE TABLE star_instructions (
	id VARCHAR(64) NOT NULL,
	campaign VARCHAR(64) NOT NULL,
	rule VARCHAR(64) NOT NULL,
	cell TEXT NOT NULL,
	record TEXT NOT NULL,
	PRIMARY KEY (id)
);

CREATE INDEX ix_star_instructions_campaign ON star_instructions (campaign);

CREATE TABLE star_members (
	campaign VARCHAR(64) NOT NULL,
	participant_id VARCHAR(64) NOT NULL,
	created_at DATETIME NOT NULL,
	PRIMARY KEY (campaign, participant_id)
);

CREATE INDEX ix_star_members_participant ON star_members (participant_id);

CREATE TABLE star_participants (
	id VARCHAR(64) NOT NULL,
	body TEXT NOT NULL,
	simulated BOOLEAN NOT NULL,
	PRIMARY KEY (id)
);

CREATE TABLE star_target_failures (
	id VARCHAR(32) NOT NULL,
	dialogue_id VARCHAR(32) NOT NULL,
	turn_index INTEGER NOT NULL,
	attempt INTEGER NOT NULL,
	reason TEXT NOT NULL,
	trace_id VARCHAR(32),
	created_at DATETIME NOT NULL,
	PRIMARY KEY (id)
);

CREATE INDEX ix_star_target_failures_dialogue_id ON star_target_failures (dialogue_id);

CREATE TABLE star_tasks (
	id VARCHAR(32) NOT NULL,
	campaign VARCHAR(64) NOT NULL,
	kind VARCHAR(16) NOT NULL,
	status VARCHAR(16) NOT NULL,
	instruction_id VARCHAR(64),
	dialogue_id VARCHAR(32),
	participant_id VARCHAR(64),
	requirement TEXT NOT NULL,
	relaxed TEXT,
	created_at DATETIME NOT NULL,
	updated_at DATETIME NOT NULL,
	lease_expires_at DATETIME,
	PRIMARY KEY (id)
);

CREATE INDEX ix_star_tasks_campaign ON star_tasks (campaign);

CREATE INDEX ix_star_tasks_dialogue_id ON star_tasks (dialogue_id);

CREATE INDEX ix_star_tasks_holder ON star_tasks (participant_id, status);

CREATE INDEX ix_star_tasks_lease ON star_tasks (status, lease_expires_at);

CREATE INDEX ix_star_tasks_queue ON star_tasks (kind, status, created_at, id);

CREATE INDEX ix_star_tasks_status ON star_tasks (status);

CREATE TABLE star_turns (
	dialogue_id VARCHAR(32) NOT NULL,
	idx INTEGER NOT NULL,
	role VARCHAR(16) NOT NULL,
	text TEXT NOT NULL,
	tension FLOAT,
	state VARCHAR(40),
	trace_id VARCHAR(32),
	refused BOOLEAN,
	PRIMARY KEY (dialogue_id, idx)
);

CREATE TABLE psychoalign_trace_keys (
	"key" VARCHAR(64) NOT NULL,
	trace_id VARCHAR(32) NOT NULL,
	created_at DATETIME NOT NULL,
	PRIMARY KEY ("key", trace_id)
);

CREATE TABLE psychoalign_traces (
	id VARCHAR(32) NOT NULL,
	created_at DATETIME NOT NULL,
	finished_at DATETIME,
	status VARCHAR(16) NOT NULL,
	owner VARCHAR(300) NOT NULL,
	request TEXT NOT NULL,
	framework VARCHAR(200),
	state VARCHAR(40),
	tension FLOAT,
	defense VARCHAR(40),
	error TEXT,
	body TEXT NOT NULL,
	PRIMARY KEY (id)
);

CREATE INDEX ix_psychoalign_traces_created_at ON psychoalign_traces (created_at);

CREATE INDEX ix_psychoalign_traces_status ON psychoalign_traces (status);

CREATE TABLE web_accounts (
	id VARCHAR(32) NOT NULL,
	username VARCHAR(64),
	display_name VARCHAR(200) NOT NULL,
	role VARCHAR(16) NOT NULL,
	participant_id VARCHAR(64),
	password_hash TEXT,
	active BOOLEAN NOT NULL,
	created_at DATETIME NOT NULL,
	PRIMARY KEY (id),
	UNIQUE (username),
	UNIQUE (participant_id)
);

CREATE TABLE web_invites (
	token_hash VARCHAR(64) NOT NULL,
	account_id VARCHAR(32) NOT NULL,
	expires_at DATETIME NOT NULL,
	used_at DATETIME,
	PRIMARY KEY (token_hash)
);

CREATE INDEX ix_web_invites_account_id ON web_invites (account_id);

CREATE TABLE web_login_failures (
	id INTEGER NOT NULL,
	"key" VARCHAR(200) NOT NULL,
	at DATETIME NOT NULL,
	PRIMARY KEY (id)
);

CREATE INDEX ix_web_login_failures_key ON web_login_failures ("key");

CREATE TABLE web_secrets (
	name VARCHAR(64) NOT NULL,
	value VARCHAR(128) NOT NULL,
	PRIMARY KEY (name)
);

CREATE TABLE web_sessions (
	token_hash VARCHAR(64) NOT NULL,
	account_id VARCHAR(32) NOT NULL,
	created_at DATETIME NOT NULL,
	expires_at DATETIME NOT NULL,
	last_seen DATETIME NOT NULL,
	PRIMARY KEY (token_hash)
);

CREATE INDEX ix_web_sessions_account_id ON web_sessions (account_id);

CREATE TABLE web_campaigns (
	name VARCHAR(64) NOT NULL,
	body TEXT NOT NULL,
	created_at DATETIME NOT NULL,
	PRIMARY KEY (name)
);

CREATE TABLE web_task_time (
	task_id VARCHAR(32) NOT NULL,
	participant_id VARCHAR(64) NOT NULL,
	campaign VARCHAR(64) NOT NULL,
	kind VARCHAR(16) NOT NULL,
	started_at DATETIME NOT NULL,
	active_since DATETIME,
	seconds FLOAT NOT NULL,
	topic TEXT,
	PRIMARY KEY (task_id, participant_id)
);

CREATE INDEX ix_web_task_time_campaign ON web_task_time (campaign);

