-- Tasks: the current projection, immutable revisions, dependencies, leases,
-- submissions, checkpoints and publication authority; FTS5 over current text.

CREATE TABLE tasks (
  id TEXT PRIMARY KEY,
  project_id TEXT NOT NULL REFERENCES projects(id),
  title TEXT NOT NULL,
  description TEXT NOT NULL,
  acceptance_criteria TEXT NOT NULL,          -- JSON array of strings
  kind TEXT NOT NULL,
  priority INTEGER NOT NULL,
  subject_task_id TEXT REFERENCES tasks(id),  -- set: this task is an activity
  status TEXT NOT NULL CHECK (status IN ('open', 'claimed', 'submitted', 'done', 'cancelled')),
  revision INTEGER NOT NULL,
  -- the latest revision that changed a judged field (decision pins compare it)
  judged_revision INTEGER NOT NULL,
  lease_owner_id TEXT REFERENCES principals(id),
  lease_session_id TEXT,
  lease_expires_at TEXT,
  lease_workflow INTEGER NOT NULL DEFAULT 0,
  publication_holder_id TEXT,
  publication_holder_session_id TEXT,
  publication_prepared_at TEXT,
  publication_result TEXT,                    -- JSON {outcome, detail, at} or NULL
  created_by TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
-- claims walk this index in claim order; lists walk the next one in creation order
CREATE INDEX tasks_by_project ON tasks (project_id, status, priority DESC, created_at, id);
CREATE INDEX tasks_by_created ON tasks (project_id, created_at, id);
CREATE INDEX tasks_by_subject ON tasks (subject_task_id) WHERE subject_task_id IS NOT NULL;

CREATE TABLE task_dependencies (
  task_id TEXT NOT NULL REFERENCES tasks(id),
  depends_on_id TEXT NOT NULL REFERENCES tasks(id),
  position INTEGER NOT NULL,                  -- keeps the order the client gave
  PRIMARY KEY (task_id, depends_on_id)
) WITHOUT ROWID;
CREATE INDEX task_dependents ON task_dependencies (depends_on_id);

CREATE TABLE task_revisions (
  task_id TEXT NOT NULL REFERENCES tasks(id),
  revision INTEGER NOT NULL,
  title TEXT NOT NULL,
  description TEXT NOT NULL,
  acceptance_criteria TEXT NOT NULL,
  kind TEXT NOT NULL,
  priority INTEGER NOT NULL,
  depends_on TEXT NOT NULL,                   -- JSON array of task ids
  changed_fields TEXT NOT NULL,               -- JSON array of field names
  judged_change INTEGER NOT NULL,
  actor_id TEXT NOT NULL,
  actor_session_id TEXT,
  at TEXT NOT NULL,
  PRIMARY KEY (task_id, revision)
) WITHOUT ROWID;
CREATE TRIGGER task_revisions_no_update BEFORE UPDATE ON task_revisions
BEGIN SELECT RAISE(ABORT, 'task_revisions rows are immutable'); END;
CREATE TRIGGER task_revisions_no_delete BEFORE DELETE ON task_revisions
BEGIN SELECT RAISE(ABORT, 'task_revisions rows are immutable'); END;

CREATE TABLE submissions (
  id TEXT PRIMARY KEY,
  task_id TEXT NOT NULL REFERENCES tasks(id),
  task_revision INTEGER NOT NULL,
  summary TEXT NOT NULL,
  actor_id TEXT NOT NULL,
  actor_session_id TEXT,
  at TEXT NOT NULL
);
CREATE INDEX submissions_by_task ON submissions (task_id, at);
CREATE TRIGGER submissions_no_update BEFORE UPDATE ON submissions
BEGIN SELECT RAISE(ABORT, 'submissions are immutable'); END;
CREATE TRIGGER submissions_no_delete BEFORE DELETE ON submissions
BEGIN SELECT RAISE(ABORT, 'submissions are immutable'); END;

CREATE TABLE task_checkpoints (
  id TEXT PRIMARY KEY,
  task_id TEXT NOT NULL REFERENCES tasks(id),
  note TEXT NOT NULL,
  actor_id TEXT NOT NULL,
  actor_session_id TEXT,
  at TEXT NOT NULL
);
CREATE INDEX checkpoints_by_task ON task_checkpoints (task_id, at);
CREATE TRIGGER task_checkpoints_no_update BEFORE UPDATE ON task_checkpoints
BEGIN SELECT RAISE(ABORT, 'checkpoints are immutable'); END;
CREATE TRIGGER task_checkpoints_no_delete BEFORE DELETE ON task_checkpoints
BEGIN SELECT RAISE(ABORT, 'checkpoints are immutable'); END;

-- Full-text search over the current task text (context packets).
CREATE VIRTUAL TABLE tasks_fts USING fts5(
  title, description, acceptance_criteria,
  content = 'tasks', content_rowid = 'rowid'
);
CREATE TRIGGER tasks_fts_insert AFTER INSERT ON tasks BEGIN
  INSERT INTO tasks_fts (rowid, title, description, acceptance_criteria)
  VALUES (new.rowid, new.title, new.description, new.acceptance_criteria);
END;
CREATE TRIGGER tasks_fts_delete AFTER DELETE ON tasks BEGIN
  INSERT INTO tasks_fts (tasks_fts, rowid, title, description, acceptance_criteria)
  VALUES ('delete', old.rowid, old.title, old.description, old.acceptance_criteria);
END;
CREATE TRIGGER tasks_fts_update AFTER UPDATE OF title, description, acceptance_criteria ON tasks
BEGIN
  INSERT INTO tasks_fts (tasks_fts, rowid, title, description, acceptance_criteria)
  VALUES ('delete', old.rowid, old.title, old.description, old.acceptance_criteria);
  INSERT INTO tasks_fts (rowid, title, description, acceptance_criteria)
  VALUES (new.rowid, new.title, new.description, new.acceptance_criteria);
END;
