-- Knowledge: the current projection of each record, its immutable revisions,
-- append-only usefulness feedback bound to one exact revision, the current
-- tags (for the list filter) and FTS5 over the current text (context packets).
--
-- List-valued fields (scope dimensions, tags) are stored as JSON arrays of
-- strings; the resolvers write them in one canonical form, so a revision row
-- is byte-identical to what was accepted.

CREATE TABLE knowledge (
  id TEXT PRIMARY KEY,
  project_id TEXT NOT NULL REFERENCES projects(id),
  -- identity fields: a correction can change neither
  kind TEXT NOT NULL CHECK (kind IN ('lesson', 'fact', 'rejected_approach', 'checkpoint')),
  collection TEXT NOT NULL CHECK (collection IN ('project', 'shared')),
  share_across_projects INTEGER NOT NULL CHECK (share_across_projects IN (0, 1)),
  -- content of the current revision
  title TEXT NOT NULL,
  body TEXT NOT NULL,
  status TEXT NOT NULL
    CHECK (status IN ('observed', 'validated', 'deprecated', 'superseded')),
  scope_task_ids TEXT NOT NULL,               -- JSON array of task ids
  scope_components TEXT NOT NULL,             -- JSON array of strings
  scope_environments TEXT NOT NULL,           -- JSON array of strings
  scope_versions TEXT NOT NULL,               -- JSON array of strings
  tags TEXT NOT NULL,                         -- JSON array of strings (FTS reads it too)
  applicability TEXT NOT NULL,
  provenance_summary TEXT NOT NULL,
  provenance_source_uri TEXT,
  provenance_source_task_id TEXT REFERENCES tasks(id),
  -- deferred: submit may insert its lessons before or after its submission row
  provenance_source_submission_id TEXT REFERENCES submissions(id) DEFERRABLE INITIALLY DEFERRED,
  provenance_actor_id TEXT NOT NULL REFERENCES principals(id),
  provenance_actor_session_id TEXT,
  provenance_recorded_at TEXT NOT NULL,
  superseded_by_id TEXT REFERENCES knowledge(id),
  revision INTEGER NOT NULL CHECK (revision >= 1),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  -- the explicit opt-in: shared needs it, project-only records must not set it
  CHECK ((collection = 'shared') = (share_across_projects = 1)),
  -- superseded exactly when a replacement is named, and never itself
  CHECK ((status = 'superseded') = (superseded_by_id IS NOT NULL)),
  CHECK (superseded_by_id IS NULL OR superseded_by_id <> id)
);
-- lists: newest first within a project, and the shared records of every project
CREATE INDEX knowledge_by_project ON knowledge (project_id, updated_at DESC, id DESC);
CREATE INDEX knowledge_shared ON knowledge (updated_at DESC, id DESC)
  WHERE collection = 'shared';
CREATE INDEX knowledge_by_source_task ON knowledge (provenance_source_task_id)
  WHERE provenance_source_task_id IS NOT NULL;

-- Every revision of every record, revision 1 included. Never changed, never removed.
CREATE TABLE knowledge_revisions (
  knowledge_id TEXT NOT NULL REFERENCES knowledge(id),
  revision INTEGER NOT NULL CHECK (revision >= 1),
  title TEXT NOT NULL,
  body TEXT NOT NULL,
  status TEXT NOT NULL
    CHECK (status IN ('observed', 'validated', 'deprecated', 'superseded')),
  scope_task_ids TEXT NOT NULL,
  scope_components TEXT NOT NULL,
  scope_environments TEXT NOT NULL,
  scope_versions TEXT NOT NULL,
  tags TEXT NOT NULL,
  applicability TEXT NOT NULL,
  provenance_summary TEXT NOT NULL,
  provenance_source_uri TEXT,
  provenance_source_task_id TEXT,
  provenance_source_submission_id TEXT,
  provenance_actor_id TEXT NOT NULL,
  provenance_actor_session_id TEXT,
  provenance_recorded_at TEXT NOT NULL,
  superseded_by_id TEXT,
  PRIMARY KEY (knowledge_id, revision)
) WITHOUT ROWID;
CREATE TRIGGER knowledge_revisions_no_update BEFORE UPDATE ON knowledge_revisions
BEGIN SELECT RAISE(ABORT, 'knowledge_revisions rows are immutable'); END;
CREATE TRIGGER knowledge_revisions_no_delete BEFORE DELETE ON knowledge_revisions
BEGIN SELECT RAISE(ABORT, 'knowledge_revisions rows are immutable'); END;

-- Usefulness feedback, bound to the exact revision the caller read.
CREATE TABLE knowledge_feedback (
  id TEXT PRIMARY KEY,
  knowledge_id TEXT NOT NULL,
  revision INTEGER NOT NULL,
  useful INTEGER NOT NULL CHECK (useful IN (0, 1)),
  comment TEXT,
  actor_id TEXT NOT NULL REFERENCES principals(id),
  actor_session_id TEXT,
  at TEXT NOT NULL,
  FOREIGN KEY (knowledge_id, revision) REFERENCES knowledge_revisions (knowledge_id, revision)
);
CREATE INDEX knowledge_feedback_by_revision ON knowledge_feedback (knowledge_id, revision, useful);
CREATE TRIGGER knowledge_feedback_no_update BEFORE UPDATE ON knowledge_feedback
BEGIN SELECT RAISE(ABORT, 'knowledge_feedback rows are immutable'); END;
CREATE TRIGGER knowledge_feedback_no_delete BEFORE DELETE ON knowledge_feedback
BEGIN SELECT RAISE(ABORT, 'knowledge_feedback rows are immutable'); END;

-- The current tags of each record, for the indexed `tag` list filter. Kept in
-- step with knowledge.tags by triggers, so no writer can forget it.
CREATE TABLE knowledge_tags (
  tag TEXT NOT NULL,
  knowledge_id TEXT NOT NULL REFERENCES knowledge(id),
  PRIMARY KEY (tag, knowledge_id)
) WITHOUT ROWID;
CREATE INDEX knowledge_tags_by_record ON knowledge_tags (knowledge_id);
CREATE TRIGGER knowledge_tags_insert AFTER INSERT ON knowledge BEGIN
  INSERT OR IGNORE INTO knowledge_tags (tag, knowledge_id)
  SELECT value, new.id FROM json_each(new.tags);
END;
CREATE TRIGGER knowledge_tags_update AFTER UPDATE OF tags ON knowledge BEGIN
  DELETE FROM knowledge_tags WHERE knowledge_id = old.id;
  INSERT OR IGNORE INTO knowledge_tags (tag, knowledge_id)
  SELECT value, new.id FROM json_each(new.tags);
END;
CREATE TRIGGER knowledge_tags_delete AFTER DELETE ON knowledge BEGIN
  DELETE FROM knowledge_tags WHERE knowledge_id = old.id;
END;

-- Full-text search over the current knowledge text (context packets). The
-- tags column holds a JSON array; the tokenizer splits it into its words.
CREATE VIRTUAL TABLE knowledge_fts USING fts5(
  title, body, tags, applicability,
  content = 'knowledge', content_rowid = 'rowid'
);
CREATE TRIGGER knowledge_fts_insert AFTER INSERT ON knowledge BEGIN
  INSERT INTO knowledge_fts (rowid, title, body, tags, applicability)
  VALUES (new.rowid, new.title, new.body, new.tags, new.applicability);
END;
CREATE TRIGGER knowledge_fts_delete AFTER DELETE ON knowledge BEGIN
  INSERT INTO knowledge_fts (knowledge_fts, rowid, title, body, tags, applicability)
  VALUES ('delete', old.rowid, old.title, old.body, old.tags, old.applicability);
END;
CREATE TRIGGER knowledge_fts_update AFTER UPDATE OF title, body, tags, applicability ON knowledge
BEGIN
  INSERT INTO knowledge_fts (knowledge_fts, rowid, title, body, tags, applicability)
  VALUES ('delete', old.rowid, old.title, old.body, old.tags, old.applicability);
  INSERT INTO knowledge_fts (rowid, title, body, tags, applicability)
  VALUES (new.rowid, new.title, new.body, new.tags, new.applicability);
END;
