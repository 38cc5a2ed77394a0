-- The private decision-memo lifecycle (lifecycle-model.md): tenant grants,
-- memos with immutable revisions, per-memo documents, the memo event log with
-- its deliveries, idempotency receipts, review requests and their outcomes.
-- Memo ids are scoped by tenant: a caller only ever sees its own tenant's
-- namespace, so no answer can tell whether another tenant uses an id.

CREATE TABLE lifecycle_grants (
  principal_id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  role TEXT NOT NULL CHECK (role IN ('reader', 'author', 'reviewer')),
  granted_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX lifecycle_grants_by_tenant ON lifecycle_grants (tenant, principal_id);

CREATE TABLE lifecycle_memos (
  tenant TEXT NOT NULL,
  id TEXT NOT NULL,
  current_version INTEGER NOT NULL,
  created_by TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (tenant, id)
) WITHOUT ROWID;
CREATE INDEX lifecycle_memos_by_update ON lifecycle_memos (tenant, updated_at DESC, id);

-- memo: the canonical Memo JSON of the revision (what GET returns)
CREATE TABLE lifecycle_revisions (
  tenant TEXT NOT NULL,
  memo_id TEXT NOT NULL,
  version INTEGER NOT NULL,
  memo TEXT NOT NULL,
  summary TEXT NOT NULL,
  title TEXT NOT NULL,
  question TEXT NOT NULL,
  context TEXT NOT NULL,
  actor TEXT NOT NULL,
  at TEXT NOT NULL,
  PRIMARY KEY (tenant, memo_id, version),
  FOREIGN KEY (tenant, memo_id) REFERENCES lifecycle_memos (tenant, id)
) WITHOUT ROWID;
CREATE TRIGGER lifecycle_revisions_no_update BEFORE UPDATE ON lifecycle_revisions
BEGIN SELECT RAISE(ABORT, 'lifecycle_revisions rows are immutable'); END;
CREATE TRIGGER lifecycle_revisions_no_delete BEFORE DELETE ON lifecycle_revisions
BEGIN SELECT RAISE(ABORT, 'lifecycle_revisions rows are immutable'); END;

-- Search over the current revision of each memo: the revision appended last is
-- the current one, so each insert replaces the memo's row.
CREATE VIRTUAL TABLE lifecycle_search USING fts5 (
  tenant UNINDEXED, memo_id UNINDEXED, title, question, context
);
CREATE TRIGGER lifecycle_revisions_search AFTER INSERT ON lifecycle_revisions
BEGIN
  DELETE FROM lifecycle_search WHERE tenant = new.tenant AND memo_id = new.memo_id;
  INSERT INTO lifecycle_search (tenant, memo_id, title, question, context)
  VALUES (new.tenant, new.memo_id, new.title, new.question, new.context);
END;

CREATE TABLE lifecycle_documents (
  tenant TEXT NOT NULL,
  memo_id TEXT NOT NULL,
  digest TEXT NOT NULL,
  media_type TEXT NOT NULL,
  content BLOB NOT NULL,
  stored_at TEXT NOT NULL,
  PRIMARY KEY (tenant, memo_id, digest),
  FOREIGN KEY (tenant, memo_id) REFERENCES lifecycle_memos (tenant, id)
) WITHOUT ROWID;
CREATE TRIGGER lifecycle_documents_no_update BEFORE UPDATE ON lifecycle_documents
BEGIN SELECT RAISE(ABORT, 'lifecycle_documents rows are immutable'); END;
CREATE TRIGGER lifecycle_documents_no_delete BEFORE DELETE ON lifecycle_documents
BEGIN SELECT RAISE(ABORT, 'lifecycle_documents rows are immutable'); END;

CREATE TABLE lifecycle_events (
  sequence INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant TEXT NOT NULL,
  memo_id TEXT NOT NULL,
  version INTEGER NOT NULL,
  type TEXT NOT NULL,
  actor TEXT NOT NULL,
  at TEXT NOT NULL,
  data TEXT NOT NULL
);
CREATE INDEX lifecycle_events_by_memo ON lifecycle_events (tenant, memo_id, sequence);
CREATE TRIGGER lifecycle_events_no_update BEFORE UPDATE ON lifecycle_events
BEGIN SELECT RAISE(ABORT, 'lifecycle_events rows are immutable'); END;
CREATE TRIGGER lifecycle_events_no_delete BEFORE DELETE ON lifecycle_events
BEGIN SELECT RAISE(ABORT, 'lifecycle_events rows are immutable'); END;

-- One delivery per event, enqueued in the event's transaction; the worker of
-- `serve --lifecycle-webhook` moves it from pending to delivered.
CREATE TABLE lifecycle_deliveries (
  event_sequence INTEGER PRIMARY KEY REFERENCES lifecycle_events (sequence),
  state TEXT NOT NULL CHECK (state IN ('pending', 'delivered')),
  attempts INTEGER NOT NULL DEFAULT 0,
  last_error TEXT,
  last_attempt_at TEXT,
  delivered_at TEXT
);
CREATE INDEX lifecycle_deliveries_pending ON lifecycle_deliveries (state, event_sequence);

-- Receipts: the exact JSON first returned, replayed to the same caller and key.
CREATE TABLE lifecycle_receipts (
  caller TEXT NOT NULL,
  key TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  tenant TEXT NOT NULL,
  memo_id TEXT NOT NULL,
  action TEXT NOT NULL,
  body TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (caller, key)
) WITHOUT ROWID;

-- receipt: the exact receipt JSON (with its intake envelope) first returned
CREATE TABLE lifecycle_review_requests (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  memo_id TEXT NOT NULL,
  version INTEGER NOT NULL,
  reviewers TEXT NOT NULL,
  receipt TEXT NOT NULL,
  requested_by TEXT NOT NULL,
  requested_at TEXT NOT NULL,
  FOREIGN KEY (tenant, memo_id, version)
    REFERENCES lifecycle_revisions (tenant, memo_id, version)
);  -- a rowid table: rowid keeps requests of one millisecond in order
CREATE INDEX lifecycle_review_requests_by_memo
  ON lifecycle_review_requests (tenant, memo_id, version, requested_at);
CREATE TRIGGER lifecycle_review_requests_no_update BEFORE UPDATE ON lifecycle_review_requests
BEGIN SELECT RAISE(ABORT, 'lifecycle_review_requests rows are immutable'); END;
CREATE TRIGGER lifecycle_review_requests_no_delete BEFORE DELETE ON lifecycle_review_requests
BEGIN SELECT RAISE(ABORT, 'lifecycle_review_requests rows are immutable'); END;

CREATE TABLE lifecycle_outcomes (
  request_id TEXT NOT NULL REFERENCES lifecycle_review_requests (id),
  reviewer TEXT NOT NULL,
  disposition TEXT NOT NULL
    CHECK (disposition IN ('accepted', 'rejected', 'changes_requested')),
  rationale TEXT NOT NULL,
  at TEXT NOT NULL,
  PRIMARY KEY (request_id, reviewer)
) WITHOUT ROWID;
CREATE TRIGGER lifecycle_outcomes_no_update BEFORE UPDATE ON lifecycle_outcomes
BEGIN SELECT RAISE(ABORT, 'lifecycle_outcomes rows are immutable'); END;
CREATE TRIGGER lifecycle_outcomes_no_delete BEFORE DELETE ON lifecycle_outcomes
BEGIN SELECT RAISE(ABORT, 'lifecycle_outcomes rows are immutable'); END;
