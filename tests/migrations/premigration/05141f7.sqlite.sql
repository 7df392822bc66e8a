-- The stores' tables at commit 05141f7 (sqlite), by freeze_schema.py

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

CREATE TABLE star_instructions (
	id VARCHAR(64) NOT NULL,
	campaign VARCHAR(64) NOT NULL,
	rule VARCHAR(64) NOT NULL,
	cell TEXT NOT NULL,
	record TEXT NOT NULL,
	PRIMARY KEY (id)
);

CREATE INDEX ix_star_instructions_campaign ON star_instructions (campaign);

CREATE TABLE star_participants (
	id VARCHAR(64) NOT NULL,
	body TEXT NOT NULL,
	simulated BOOLEAN NOT NULL,
	PRIMARY KEY (id)
);

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
	PRIMARY KEY (id)
);

CREATE INDEX ix_star_tasks_campaign ON star_tasks (campaign);

CREATE INDEX ix_star_tasks_dialogue_id ON star_tasks (dialogue_id);

CREATE INDEX ix_star_tasks_status ON star_tasks (status);

CREATE TABLE star_turns (
	dialogue_id VARCHAR(32) NOT NULL,
	idx INTEGER NOT NULL,
	role VARCHAR(16) NOT NULL,
	text TEXT NOT NULL,
	tension FLOAT,
	state VARCHAR(40),
	trace_id VARCHAR(32),
	PRIMARY KEY (dialogue_id, idx)
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

