-- The search index of 0010_lifecycle.sql found a memo's row by its UNINDEXED
-- tenant and memo_id columns, which FTS5 can only do by scanning every row:
-- each revision cost a full scan (about 30 ms at 20,000 memos, on the single
-- writer). Here each memo gets a stable integer key, and its index row is
-- found by rowid.

DROP TRIGGER lifecycle_revisions_search;
DROP TABLE lifecycle_search;

CREATE TABLE lifecycle_search_keys (
  rowid INTEGER PRIMARY KEY,
  tenant TEXT NOT NULL,
  memo_id TEXT NOT NULL,
  UNIQUE (tenant, memo_id)
);

CREATE VIRTUAL TABLE lifecycle_search USING fts5 (title, question, context);

INSERT INTO lifecycle_search_keys (tenant, memo_id) SELECT tenant, id FROM lifecycle_memos;
INSERT INTO lifecycle_search (rowid, title, question, context)
  SELECT k.rowid, r.title, r.question, r.context
  FROM lifecycle_search_keys k
  JOIN lifecycle_memos m ON m.tenant = k.tenant AND m.id = k.memo_id
  JOIN lifecycle_revisions r
    ON r.tenant = m.tenant AND r.memo_id = m.id AND r.version = m.current_version;

-- revisions are appended in version order: the one inserted last is current
CREATE TRIGGER lifecycle_revisions_search AFTER INSERT ON lifecycle_revisions
BEGIN
  INSERT OR IGNORE INTO lifecycle_search_keys (tenant, memo_id)
  VALUES (new.tenant, new.memo_id);
  DELETE FROM lifecycle_search WHERE rowid = (
    SELECT rowid FROM lifecycle_search_keys WHERE tenant = new.tenant AND memo_id = new.memo_id
  );
  INSERT INTO lifecycle_search (rowid, title, question, context)
  SELECT rowid, new.title, new.question, new.context FROM lifecycle_search_keys
  WHERE tenant = new.tenant AND memo_id = new.memo_id;
END;
