-- Principals, tokens, sessions, projects with their policy projection, policy
-- history, idempotency receipts and the event log.

CREATE TABLE principals (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('human', 'agent')),
  name TEXT NOT NULL,
  created_at TEXT NOT NULL
);

CREATE TABLE tokens (
  id TEXT PRIMARY KEY,
  principal_id TEXT NOT NULL REFERENCES principals(id),
  audience TEXT NOT NULL CHECK (audience IN ('api', 'lifecycle')),
  sha256 BLOB NOT NULL UNIQUE,
  created_at TEXT NOT NULL,
  revoked_at TEXT
);

CREATE TABLE sessions (
  id TEXT PRIMARY KEY,
  principal_id TEXT NOT NULL REFERENCES principals(id),
  started_at TEXT NOT NULL,
  expires_at TEXT NOT NULL,
  ended_at TEXT
);
CREATE INDEX sessions_by_principal ON sessions (principal_id, expires_at);

-- The policy projection lives on the project row: projects.rules and
-- projects.policy_revision are the only binding policy.
CREATE TABLE projects (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  created_at TEXT NOT NULL,
  created_by TEXT NOT NULL REFERENCES principals(id),
  policy_revision INTEGER NOT NULL,
  rules TEXT NOT NULL,
  -- the latest policy revision that changed the rules text (decision pins)
  rules_revision INTEGER NOT NULL,
  agent_rule_editing INTEGER NOT NULL CHECK (agent_rule_editing IN (0, 1)),
  allow_relayed_human_answers INTEGER NOT NULL CHECK (allow_relayed_human_answers IN (0, 1)),
  integration_owner TEXT REFERENCES principals(id),
  lease_seconds INTEGER NOT NULL,
  review_mode TEXT NOT NULL CHECK (review_mode IN ('none', 'human', 'any')),
  policy_updated_at TEXT NOT NULL,
  policy_updated_by TEXT NOT NULL
);

CREATE TABLE policy_revisions (
  project_id TEXT NOT NULL REFERENCES projects(id),
  revision INTEGER NOT NULL,
  rules TEXT NOT NULL,
  agent_rule_editing INTEGER NOT NULL,
  allow_relayed_human_answers INTEGER NOT NULL,
  integration_owner TEXT,
  lease_seconds INTEGER NOT NULL,
  review_mode TEXT NOT NULL,
  actor_id TEXT NOT NULL,
  actor_kind TEXT NOT NULL,
  actor_session_id TEXT,
  at TEXT NOT NULL,
  provenance TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (project_id, revision)
) WITHOUT ROWID;

CREATE TRIGGER policy_revisions_no_update BEFORE UPDATE ON policy_revisions
BEGIN SELECT RAISE(ABORT, 'policy_revisions rows are immutable'); END;
CREATE TRIGGER policy_revisions_no_delete BEFORE DELETE ON policy_revisions
BEGIN SELECT RAISE(ABORT, 'policy_revisions rows are immutable'); END;

-- Idempotency receipts: written in the transaction of the mutation they record.
CREATE TABLE receipts (
  principal_id TEXT NOT NULL,
  key TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  status INTEGER NOT NULL,
  body TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (principal_id, key)
) WITHOUT ROWID;
CREATE INDEX receipts_by_age ON receipts (created_at);

CREATE TABLE events (
  sequence INTEGER PRIMARY KEY AUTOINCREMENT,
  project_id TEXT,
  type TEXT NOT NULL,
  subject_type TEXT NOT NULL,
  subject_id TEXT NOT NULL,
  actor_id TEXT,
  actor_session_id TEXT,
  at TEXT NOT NULL,
  data TEXT NOT NULL
);
CREATE INDEX events_by_project ON events (project_id, sequence);
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
